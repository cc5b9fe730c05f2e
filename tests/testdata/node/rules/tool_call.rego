package turngate.tool_call

import rego.v1

# The client suite needs no policy; this rule only shows that rules run
# (nothing in the suite deletes anything).
block contains "delete is disabled" if {
	input.tool.name == "delete"
}
