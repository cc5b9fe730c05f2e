package turngate.tool_call_test

import data.turngate.tool_call

# Only the delete rule is tested: the search rule's body is not covered.
test_user_cannot_delete if {
	tool_call.block == {"only admins may delete"} with input as {"tool": {"name": "delete"}, "principal": {"roles": ["user"]}}
}
