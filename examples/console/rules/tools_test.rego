package turngate.tool_call_test

import data.turngate.tool_call

test_etc_deletes_blocked if {
	tool_call.block == {"no deletes under /etc"} with input as {"tool": {"name": "delete", "input": {"path": "/etc/passwd"}}}
}

test_prod_deletes_wait_for_ops if {
	tool_call.approval == {{"reason": "deletes a production file", "approvers": ["role:ops"]}} with input as {"tool": {"name": "delete", "input": {"path": "/prod/db"}}}
}
