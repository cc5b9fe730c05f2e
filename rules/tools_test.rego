package turngate.tool_call_test

import rego.v1

import data.turngate.tool_call

test_delete_blocked_in_read_only_mode if {
	tool_call.block == {"delete is disabled in read-only mode"} with input as {
		"tool": {"name": "delete", "input": {"path": "/tmp/x"}},
		"body": {"mode": "read-only"},
	}
}

test_delete_allowed_without_read_only_mode if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "delete", "input": {"path": "/tmp/x"}},
		"body": {},
	}
}

test_search_limit_clamped if {
	tool_call.patch == {{"op": "replace", "path": "/limit", "value": 50}} with input as {
		"tool": {"name": "search", "input": {"query": "go", "limit": 500}},
		"body": {},
	}
}

test_search_small_limit_untouched if {
	count(tool_call.patch) == 0 with input as {
		"tool": {"name": "search", "input": {"query": "go", "limit": 5}},
		"body": {},
	}
}

test_clamp_follows_the_data_document if {
	tool_call.patch == {{"op": "replace", "path": "/limit", "value": 20}} with input as {
		"tool": {"name": "search", "input": {"query": "go", "limit": 25}},
		"body": {},
	}
		with data.limits.search as 20
}

test_weather_allowed if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "weather", "input": {"city": "Paris"}},
		"body": {"mode": "read-only"},
	}
}
