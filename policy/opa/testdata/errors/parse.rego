package turngate.tool_call

# Rego v0 syntax (no `if`, no `contains`) is a parse error.
block["old style"] {
	input.tool.name == "delete"
}
