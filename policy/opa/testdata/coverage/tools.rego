package turngate.tool_call

block contains "only admins may delete" if {
	input.tool.name == "delete"
	not "admin" in input.principal.roles
}

block contains "search needs a query" if {
	input.tool.name == "search"
	trim_space(input.tool.input.query) == ""
}
