package turngate.tool_call_test

import data.turngate.tool_call

test_prod_needs_another_ops_approver if {
	tool_call.approval == {{"reason": "deletes a production file", "approvers": ["role:ops"]}} with input as {"tool": {"name": "delete", "input": {"path": "/prod/db"}}}
}

test_shared_lets_the_asker_decide if {
	tool_call.approval == {{"reason": "deletes a shared file", "approvers": ["role:ops", "requester"]}} with input as {"tool": {"name": "delete", "input": {"path": "/shared/notes"}}}
}

test_other_deletes_run if {
	count(tool_call.approval) == 0 with input as {"tool": {"name": "delete", "input": {"path": "tmp.txt"}}}
}
