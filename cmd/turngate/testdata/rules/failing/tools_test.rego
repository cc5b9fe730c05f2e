package turngate.tool_call_test

import rego.v1

import data.turngate.tool_call

test_delete_blocked if {
	count(tool_call.block) == 1 with input as {"tool": {"name": "delete", "input": {}}, "body": {"mode": "read-only"}}
}

test_search_blocked_wrongly if {
	count(tool_call.block) == 1 with input as {"tool": {"name": "search", "input": {}}, "body": {}}
}
