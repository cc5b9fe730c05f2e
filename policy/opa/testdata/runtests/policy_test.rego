package turngate.tool_call_test

import data.turngate.tool_call

test_user_cannot_delete if {
	tool_call.block == {"only admins may delete"} with input as {"tool": {"name": "delete"}, "principal": {"roles": ["user"]}}
}

test_admin_can_delete if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "delete"}, "principal": {"roles": ["admin"]}}
}

# This one is wrong on purpose: admins are not blocked.
test_admin_blocked_fails if {
	print("block set:", tool_call.block) with input as {"tool": {"name": "delete"}, "principal": {"roles": ["admin"]}}
	tool_call.block == {"only admins may delete"} with input as {"tool": {"name": "delete"}, "principal": {"roles": ["admin"]}}
}

test_runtime_error if {
	1 / 0 == 1
}

todo_test_later if {
	false
}
