package turngate.tool_call

import rego.v1

block contains "at most 20 emails an hour" if {
	input.tool.name == "send_email"
	input.state.emails_per_hour >= 20
}

block contains "at most 100 emails a day" if {
	input.tool.name == "send_email"
	input.state.emails_per_day >= 100
}
