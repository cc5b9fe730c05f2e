package turngate.tool_call

import data.turngate.lib

blocks contains "no deletes" if input.tool.name == "delete"

substitue := {"output": "cached"} if input.tool.name == "weather"

aproval contains "moves money" if input.tool.name == "transfer"

redact contains "/secret" if lib.secret

# Helpers of other names are fine.
is_delete if input.tool.name == "delete"

block contains "still here" if is_delete

# Read by a rule, a name close to a decision is a helper too.
blocked if input.tool.name in {"rm", "dd"}

block contains "a blocked tool" if blocked

approver := "role:finance"

approval contains {"reason": "moves money", "approvers": [approver]} if input.tool.name == "wire"
