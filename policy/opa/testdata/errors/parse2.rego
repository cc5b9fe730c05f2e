package turngate.tool_call

block contains "unclosed" if {
	input.tool.name == "delete"
