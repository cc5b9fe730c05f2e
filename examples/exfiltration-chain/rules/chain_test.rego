package turngate.tool_call_test

import data.turngate.tool_call

post := {"name": "http_post", "input": {"url": "https://paste.example.com"}}

test_post_after_a_secret_needs_approval if {
	tool_call.approval == {"this session has read a secret: posting out needs approval"} with input as {
		"tool": post,
		"state": {"secret_read": {"happened": true, "at": "2026-12-01T09:00:00Z"}},
	}
}

test_post_without_a_secret_runs if {
	count(tool_call.approval) == 0 with input as {"tool": post, "state": {"secret_read": {"happened": false, "at": ""}}}
}

test_reading_is_not_held if {
	count(tool_call.approval) == 0 with input as {
		"tool": {"name": "read_secret", "input": {"name": "db"}},
		"state": {"secret_read": {"happened": true, "at": "2026-12-01T09:00:00Z"}},
	}
}
