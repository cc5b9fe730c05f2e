package turngate.tool_call_test

import rego.v1

import data.turngate.tool_call

test_search_limited if {
	tool_call.patch == {{"op": "add", "path": "/limit", "value": 3}} with input as {"tool": {"name": "search", "input": {"query": "q"}}}
}

test_small_search_untouched if {
	count(tool_call.patch) == 0 with input as {"tool": {"name": "search", "input": {"query": "q", "limit": 2}}}
}
