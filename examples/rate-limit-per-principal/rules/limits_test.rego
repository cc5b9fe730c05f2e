package turngate.tool_call_test

import data.turngate.tool_call

email := {"name": "send_email", "input": {"to": "bob@example.com"}}

test_under_the_limit_runs if {
	count(tool_call.block) == 0 with input as {"tool": email, "state": {"emails_per_hour": 2}}
}

test_at_the_limit_is_blocked if {
	tool_call.block == {"send_email may run at most 3 times an hour per caller"} with input as {"tool": email, "state": {"emails_per_hour": 3}}
}

test_other_tools_are_not_limited if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "search", "input": {}}, "state": {"emails_per_hour": 99}}
}
