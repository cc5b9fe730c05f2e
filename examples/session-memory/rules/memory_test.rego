package turngate.tool_call_test

import data.turngate.tool_call

test_a_password_is_not_remembered if {
	tool_call.block == {"the memory must not hold passwords or card numbers"} with input as {
		"tool": {"name": "update_context", "kind": "context", "input": {"block": "memory", "content": "my password is hunter2"}},
	}
}

test_a_card_number_is_not_remembered if {
	count(tool_call.block) == 1 with input as {
		"tool": {"name": "update_context", "kind": "context", "input": {"block": "memory", "content": "card 4111 1111 1111 1111"}},
	}
}

test_a_preference_is_remembered if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "update_context", "kind": "context", "input": {"block": "memory", "content": "allergic to nuts"}},
	}
}

test_other_tools_are_not_concerned if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "search", "kind": "http", "input": {"content": "password reset"}},
	}
}
