package turngate.tool_call

import data.acme.lists

block contains "listed" if input.tool.name in lists.block
