package turngate.lib

import data.turngate.lib.deep

# Used by turngate.tool_call, and uses turngate.lib.deep: both are used.
secret if deep.on
