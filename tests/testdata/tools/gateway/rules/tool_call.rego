package turngate.tool_call

# Nothing is deleted through an MCP server: the rule names the kind of
# tool and its server, so a delete tool of any other kind stays allowed.
block contains sprintf("%s tool %s of server %s may not delete", [input.tool.kind, input.tool.name, input.tool.server]) if {
	input.tool.kind == "mcp"
	input.tool.server in {"files", "local"}
	endswith(input.tool.name, "_delete")
}

# The sub-agent b may not take notes; a top-level turn may.
block contains sprintf("agent %s may not take notes (%s at depth %v)", [input.agent, input.entryPath, input.depth]) if {
	input.tool.name == "note"
	input.agent == "b"
	input.entryPath == "subAgent"
	input.depth == 1
}
