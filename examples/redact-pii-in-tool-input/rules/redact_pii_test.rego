package turngate.tool_call_test

import data.turngate.tool_call

test_email_in_body_is_masked if {
	tool_call.patch == {{"op": "replace", "path": "/body", "value": "Reach me at [email redacted] or [email redacted]."}} with input as {"tool": {
		"name": "create_ticket",
		"input": {"title": "Complaint", "body": "Reach me at jane.doe@example.com or j@x.io."},
	}}
}

test_every_field_is_checked if {
	count(tool_call.patch) == 2 with input as {"tool": {
		"name": "create_ticket",
		"input": {"title": "From bob@example.org", "body": "cc alice@example.org"},
	}}
}

test_clean_input_is_untouched if {
	count(tool_call.patch) == 0 with input as {"tool": {
		"name": "create_ticket",
		"input": {"title": "Complaint", "body": "The app crashes on start."},
	}}
}

test_internal_tools_are_untouched if {
	count(tool_call.patch) == 0 with input as {"tool": {
		"name": "crm_lookup",
		"input": {"email": "jane.doe@example.com"},
	}}
}
