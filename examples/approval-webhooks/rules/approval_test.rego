package turngate.tool_call_test

import data.turngate.tool_call

test_ops_approves_prod_deletes if {
	tool_call.approval == {{"reason": "deletes a production file", "approvers": ["role:ops"]}} with input as {"tool": {"name": "delete", "input": {"path": "/prod/db"}}}
}

test_other_deletes_run if {
	count(tool_call.approval) == 0 with input as {"tool": {"name": "delete", "input": {"path": "notes.txt"}}}
}
