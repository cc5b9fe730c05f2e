package turngate.tool_call

import rego.v1

block contains "at most 20 emails an hour" if {
	input.tool.name == "send_email"
	input.state.emails_per_hour >= 20
}
