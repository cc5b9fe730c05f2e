package turngate.tool_call_test

import data.turngate.tool_call

search := {"name": "search", "input": {"query": "go"}}

test_first_calls_are_allowed if {
	count(tool_call.block) == 0 with input as {"tool": search, "previousCalls": [{"toolName": "search", "decision": "allow"}]}
}

test_third_call_is_blocked if {
	tool_call.block == {"search may run at most 2 times per turn"} with input as {"tool": search, "previousCalls": [
		{"toolName": "search", "decision": "allow"},
		{"toolName": "weather", "decision": "allow"},
		{"toolName": "search", "decision": "rewrite"},
	]}
}

test_blocked_calls_do_not_count if {
	count(tool_call.block) == 0 with input as {"tool": search, "previousCalls": [
		{"toolName": "search", "decision": "allow"},
		{"toolName": "search", "decision": "block"},
	]}
}

test_unlisted_tools_are_unlimited if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "weather", "input": {}}, "previousCalls": [
		{"toolName": "weather", "decision": "allow"},
		{"toolName": "weather", "decision": "allow"},
		{"toolName": "weather", "decision": "allow"},
	]}
}
