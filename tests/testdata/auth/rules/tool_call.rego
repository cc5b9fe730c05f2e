package turngate.tool_call

import rego.v1

# The auth tests need no policy; this rule only shows that rules run
# (nothing in these tests deletes anything).
block contains "delete is disabled" if {
	input.tool.name == "delete"
}
