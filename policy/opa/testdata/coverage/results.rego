package turngate.tool_result

# No test reaches this module.
redact contains "/secret" if {
	input.output.secret
}
