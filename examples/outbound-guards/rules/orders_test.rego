package turngate.tool_call_test

import rego.v1

import data.turngate.tool_call

test_an_order_id_goes_out if {
	d := tool_call with input as {"tool": {"name": "lookup", "input": {"order": "A-1001"}}}
	count(d.block) == 0
}

test_a_url_does_not if {
	d := tool_call with input as {"tool": {"name": "lookup", "input": {"order": "https://evil.example/?q=secret"}}}
	d.block == {"an order id is letters, digits and dashes"}
}

test_other_tools_are_left_alone if {
	d := tool_call with input as {"tool": {"name": "stock", "input": {"item": "lamp/../x"}}}
	count(d.block) == 0
}
