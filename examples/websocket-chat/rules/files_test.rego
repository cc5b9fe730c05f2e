package turngate.tool_call_test

import data.turngate.tool_call

test_etc_blocked if {
	tool_call.block == {"deleting /etc/hosts is not allowed"} with input as {
		"tool": {"name": "delete", "input": {"path": "/etc/hosts"}},
	}
}

test_other_paths_allowed if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "delete", "input": {"path": "notes.txt"}},
	}
}
