package turngate.tool_call_test

import data.turngate.tool_call

test_limit_above_50_is_clamped if {
	tool_call.patch == {{"op": "replace", "path": "/limit", "value": 50}} with input as {"tool": {"name": "search", "input": {"query": "go", "limit": 500}}}
}

test_missing_limit_defaults_to_10 if {
	tool_call.patch == {{"op": "add", "path": "/limit", "value": 10}} with input as {"tool": {"name": "search", "input": {"query": "go"}}}
}

test_small_limit_is_kept if {
	count(tool_call.patch) == 0 with input as {"tool": {"name": "search", "input": {"query": "go", "limit": 5}}}
}

test_limit_of_exactly_50_is_kept if {
	count(tool_call.patch) == 0 with input as {"tool": {"name": "search", "input": {"query": "go", "limit": 50}}}
}
