package turngate.tool_call_test

import data.turngate.tool_call

test_delete_blocked_on_messages if {
	tool_call.block == {"deleting files is not allowed from Claude clients"} with input as {
		"tool": {"name": "delete_file", "input": {"path": "notes.txt"}},
		"entryPath": "anthropic",
	}
}

test_delete_allowed_elsewhere if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "delete_file", "input": {"path": "notes.txt"}},
		"entryPath": "openai",
	}
}

test_other_tools_unaffected if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "get_location", "input": {}},
		"entryPath": "anthropic",
	}
}
