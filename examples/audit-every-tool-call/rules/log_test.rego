package turngate.tool_call_test

import data.turngate.tool_call

# The document has no decision rules: every call is allowed unchanged.
test_calls_are_allowed_unchanged if {
	d := tool_call with input as {"tool": {"name": "weather", "input": {"city": "Paris"}}}
	not d.block
	not d.patch
	not d.substitute
	d.logged
}
