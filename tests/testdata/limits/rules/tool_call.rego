package turngate.tool_call

import rego.v1

# The limits tests need no policy; this rule only shows that rules run.
block contains "delete is disabled" if {
	input.tool.name == "delete"
}
