package turngate.tool_call

import rego.v1

# probe boom: a strict builtin error at runtime (to_number of a non-number).
block contains "never shown" if {
	input.tool.name == "probe"
	input.tool.input.mode == "boom"
	to_number(concat("", ["INTERNAL-", input.tool.input.mode])) > 0
}

# probe conflict: this file and conflict.rego substitute different outputs.
substitute := {"output": "INTERNAL-substitute-a"} if {
	input.tool.name == "probe"
	input.tool.input.mode == "conflict"
}
