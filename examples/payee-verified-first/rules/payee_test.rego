package turngate.tool_call_test

import data.turngate.tool_call

wire := {"name": "wire_transfer", "input": {"payee": "Acme", "amount": 100}}

reason := "verify the payee first: wire_transfer needs a successful verify_payee for it in this session"

test_unverified_payee_is_blocked if {
	tool_call.block == {reason} with input as {"tool": wire, "state": {"payee_verified": {"happened": false, "at": ""}}}
}

test_verified_payee_is_paid if {
	count(tool_call.block) == 0 with input as {"tool": wire, "state": {"payee_verified": {"happened": true, "at": "2026-12-01T09:00:00Z"}}}
}

test_verifying_is_never_blocked if {
	count(tool_call.block) == 0 with input as {
		"tool": {"name": "verify_payee", "input": {"payee": "Acme"}},
		"state": {"payee_verified": {"happened": false, "at": ""}},
	}
}
