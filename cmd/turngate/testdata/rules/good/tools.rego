package turngate.tool_call

import rego.v1

block contains "delete is disabled in read-only mode" if {
	input.tool.name == "delete"
	input.body.mode == "read-only"
}

patch contains {"op": "replace", "path": "/limit", "value": 50} if {
	input.tool.name == "search"
	input.tool.input.limit > 50
}
