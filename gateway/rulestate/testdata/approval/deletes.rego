package turngate.tool_call

import rego.v1

approval contains "deletes need approval" if {
	input.tool.name == "delete"
	input.state.deletes >= 0
}
