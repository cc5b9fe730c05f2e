package turngate.tool_call

import rego.v1

# The value read is the count before this call: the 4th call sees 3.
block contains "send_email may run at most 3 times an hour per caller" if {
	input.tool.name == "send_email"
	input.state.emails_per_hour >= 3
}
