package turngate.tool_call_test

import data.turngate.tool_call

deploy(targets) := {"tool": {"name": "deploy", "input": {"targets": targets}}}

test_protected_targets_are_named_sorted if {
	tool_call.block == {"deploy to billing, prod needs a change ticket"} with input as deploy(["staging", "prod", "billing", "prod"])
}

test_unprotected_targets_run if {
	count(tool_call.block) == 0 with input as deploy(["staging", "dev"])
}

# The pitfall itself: an array is not a set.
test_array_never_equals_set if {
	["prod"] != {"prod"}
	{t | some t in ["prod", "prod"]} == {"prod"}
	count(["prod", "prod"]) == 2
}
