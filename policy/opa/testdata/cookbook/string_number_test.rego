package turngate.tool_call_test

import data.turngate.tool_call

bulk(body) := {"tool": {"name": "bulk_email", "input": {}}, "body": body}

test_number_over_the_cap_is_blocked if {
	tool_call.block == {"bulk_email: at most 10 recipients"} with input as bulk({"maxRecipients": 50})
}

test_string_over_the_cap_is_blocked if {
	tool_call.block == {"bulk_email: at most 10 recipients"} with input as bulk({"maxRecipients": "50"})
}

test_small_number_and_string_run if {
	count(tool_call.block) == 0 with input as bulk({"maxRecipients": 5})
	count(tool_call.block) == 0 with input as bulk({"maxRecipients": "5"})
}

test_other_values_are_refused if {
	tool_call.block == {"bulk_email: maxRecipients must be a number"} with input as bulk({"maxRecipients": "lots"})
	tool_call.block == {"bulk_email: maxRecipients must be a number"} with input as bulk({})
}

# The pitfall itself: no conversion, and strings sort after numbers.
test_strings_are_not_numbers if {
	"5" != 5
	"2" > 10
}
