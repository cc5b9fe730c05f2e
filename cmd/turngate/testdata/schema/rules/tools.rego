package turngate.tool_call

block contains "delete is disabled in read-only mode" if {
	input.tool.name == "delete"
	input.body.mood == "read-only"
}
