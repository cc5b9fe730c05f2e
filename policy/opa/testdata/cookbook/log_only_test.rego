package turngate.tool_call_test

import data.turngate.tool_call

test_ordinary_call_has_no_decision if {
	d := tool_call with input as {"tool": {"name": "lookup", "input": {}}, "body": {}}
	count(d.block) == 0
	count(d.patch) == 0
	not d.substitute
}
