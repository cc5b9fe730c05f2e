package turngate.tool_call_test

import data.turngate.tool_call

test_large_charge_blocked if {
	tool_call.block == {"charges above 1000 need a person"} with input as {"tool": {"name": "charge", "input": {"item": "a yacht", "amount": 250000}}}
}

test_ordinary_charge_allowed if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "charge", "input": {"item": "a lamp"}}}
}
