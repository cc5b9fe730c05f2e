package turngate.tool_result_test

import rego.v1

import data.turngate.tool_result

test_top_level_secret_redacted if {
	tool_result.redact == {"/secret"} with input as {"output": {"secret": "s3cr3t", "city": "Paris"}}
}

test_nested_and_listed_secrets_redacted if {
	tool_result.redact == {"/users/0/password", "/auth/API_KEY"} with input as {"output": {
		"users": [{"name": "ann", "password": "hunter2"}],
		"auth": {"API_KEY": "k"},
	}}
}

test_pointer_escapes_slash_and_tilde if {
	tool_result.redact == {"/a~1b~0c/token"} with input as {"output": {"a/b~c": {"token": "t"}}}
}

test_plain_output_untouched if {
	count(tool_result.redact) == 0 with input as {"output": {"city": "Paris", "tempC": 21}}
}

test_string_output_untouched if {
	count(tool_result.redact) == 0 with input as {"output": "3 results"}
}
