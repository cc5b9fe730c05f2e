package turngate.tool_call_test

import data.turngate.tool_call

test_user_approves_ordinary_deletes if {
	tool_call.approval == {"deletes a file"} with input as {"tool": {"name": "delete", "input": {"path": "notes.txt"}}}
}

test_ops_approves_prod_deletes if {
	tool_call.approval == {{"reason": "deletes a production file", "approvers": ["role:ops"]}} with input as {"tool": {"name": "delete", "input": {"path": "/prod/db"}}}
}

test_other_tools_run if {
	count(tool_call.approval) == 0 with input as {"tool": {"name": "search", "input": {}}}
}
