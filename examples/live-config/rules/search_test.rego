package turngate.tool_call_test

import rego.v1

import data.turngate.tool_call

test_search_limit_clamped if {
	tool_call.patch == {{"op": "replace", "path": "/limit", "value": 1}} with input as {"tool": {"name": "search", "input": {"query": "q", "limit": 5}}}
}

test_search_without_limit_clamped if {
	count(tool_call.patch) == 1 with input as {"tool": {"name": "search", "input": {"query": "q"}}}
}

test_weather_untouched if {
	count(tool_call.patch) == 0 with input as {"tool": {"name": "weather", "input": {"city": "Lima"}}}
}
