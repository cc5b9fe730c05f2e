# Test rules for the gateway: block every delete, clamp search limits to 2.
package turngate.tool_call

block contains "delete is disabled on this gateway" if {
	input.tool.name == "delete"
}

patch contains {"op": "replace", "path": "/limit", "value": 2} if {
	input.tool.name == "search"
	input.tool.input.limit > 2
}
