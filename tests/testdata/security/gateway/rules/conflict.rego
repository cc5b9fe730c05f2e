package turngate.tool_call

import rego.v1

substitute := {"output": "INTERNAL-substitute-b"} if {
	input.tool.name == "probe"
	input.tool.input.mode == "conflict"
}
