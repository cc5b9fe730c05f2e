package turngate.tool_call

import data.turngate.helpres
import data.turngate.helpers

# A typo in the import: helpres.bad is undefined, so the rule never fires.
block contains "misspelt import" if helpres.bad

block contains "right import" if helpers.bad
