package turngate.tool_call

import rego.v1

# The client suite needs no policy; this rule only shows that rules run
# (nothing in the suite deletes anything).
block contains "delete is disabled" if {
	input.tool.name == "delete"
}

# anthropic.test.js: a client tool call the rules block never reaches the
# client.
block contains "deleting files is not allowed here" if {
	input.tool.name == "delete_file"
}
