package turngate.tool_call_test

import data.turngate.tool_call

test_delete_blocked_in_read_only_mode if {
	tool_call.block == {"delete is disabled in read-only mode"} with input as {
		"tool": {"name": "delete", "input": {"path": "notes.txt"}},
		"body": {"mode": "read-only"},
	}
}

test_delete_allowed_without_the_mode if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "delete", "input": {"path": "notes.txt"}},
		"body": {},
	}
}

test_other_tools_unaffected_in_read_only_mode if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "read", "input": {"path": "notes.txt"}},
		"body": {"mode": "read-only"},
	}
}
