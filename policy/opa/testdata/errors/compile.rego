package turngate.tool_call

block contains reason if {
	input.tool.name == "delete"
}

patch contains {"op": "replace", "path": "/limit", "value": x} if {
	x := concat(",", 42)
}
