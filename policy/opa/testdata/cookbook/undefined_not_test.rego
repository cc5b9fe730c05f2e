package turngate.tool_call_test

import data.turngate.tool_call

transfer(tool_input) := {"tool": {"name": "transfer", "input": tool_input}}

reason := "transfer needs an allowed region (eu or us)"

test_missing_region_is_blocked if {
	reason in tool_call.block with input as transfer({"amount": 10})
}

test_other_region_is_blocked if {
	reason in tool_call.block with input as transfer({"region": "asia"})
}

test_non_string_region_is_blocked if {
	reason in tool_call.block with input as transfer({"region": 7})
}

test_allowed_region_in_any_case_runs if {
	not reason in tool_call.block with input as transfer({"region": "EU"})
}

# The pitfall itself: the unsafe form misses a missing region.
unsafe_block if {
	input.tool.name == "transfer"
	not lower(input.tool.input.region) in tool_call.transfer_regions
}

test_unsafe_form_misses_a_missing_region if {
	not unsafe_block with input as transfer({"amount": 10})
	unsafe_block with input as transfer({"region": "asia"})
}
