package turngate.tool_call

block contains "only admins may delete" if {
	input.tool.name == "delete"
	not "admin" in input.principal.roles
}
