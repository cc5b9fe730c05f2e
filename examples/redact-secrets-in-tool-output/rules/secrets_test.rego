package turngate.tool_result_test

import data.turngate.tool_result

account := {
	"account": "acme-prod",
	"database": {"host": "db.internal", "password": "hunter2"},
	"api_key": "sk_live_51Hx9aZqT3",
	"notes": "Rotate the deploy token ghp_AbC123xyz456DEF before Friday.",
}

test_secret_fields_are_redacted if {
	tool_result.redact == {"/database/password", "/api_key"} with input as {"output": account}
}

test_tokens_in_text_are_masked if {
	{"op": "replace", "path": "/notes", "value": "Rotate the deploy token [secret redacted] before Friday."} in tool_result.patch with input as {"output": account}
}

test_tokens_in_lists_are_masked if {
	tool_result.patch == {{"op": "replace", "path": "/keys/1", "value": "[secret redacted]"}} with input as {"output": {"keys": ["public", "sk_test_abc"]}}
}

test_clean_output_is_untouched if {
	count(tool_result.redact) == 0 with input as {"output": {"account": "acme-prod", "region": "eu-west-1"}}
	count(tool_result.patch) == 0 with input as {"output": {"account": "acme-prod", "region": "eu-west-1"}}
}
