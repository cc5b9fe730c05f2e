package turngate.tool_call

import rego.v1

block contains reason if {
	input.tool.name == "delete"
	reason := sprintf("no %s", [nme])
}
