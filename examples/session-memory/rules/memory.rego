# Keep secrets out of the model's memory: a write to a writable context
# block (the gateway's update_context tool, kind "context") that looks like
# it holds a password or a card number is blocked; nothing is stored and
# the model is told why.
package turngate.tool_call

import rego.v1

block contains "the memory must not hold passwords or card numbers" if {
	input.tool.kind == "context"
	regex.match(`(?i)password|\b(?:\d[ -]?){13,16}\b`, input.tool.input.content)
}
