# Test rule: a client's confirm output never shows its token to the model.
package turngate.tool_result

redact contains "/token" if {
	input.tool.name == "confirm"
	input.output.token
}
