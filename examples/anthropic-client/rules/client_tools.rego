package turngate.tool_call

import rego.v1

# Claude SDK clients may not have the agent delete their files: the rule
# holds for the tools a Messages request declares as for any other, and
# entryPath says the turn came in on POST /v1/messages.
block contains "deleting files is not allowed from Claude clients" if {
	input.tool.name == "delete_file"
	input.entryPath == "anthropic"
}
