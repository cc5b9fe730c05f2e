package turngate.tool_call_test

import data.turngate.tool_call

test_delete_blocked_in_read_only_mode if {
	"delete is disabled in read-only mode" in tool_call.block with input as {
		"tool": {"name": "delete", "input": {"id": 7}},
		"body": {"mode": "read-only"},
	}
}

test_delete_allowed_in_read_write_mode if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "delete", "input": {"id": 7}},
		"body": {"mode": "read-write"},
	}
}
