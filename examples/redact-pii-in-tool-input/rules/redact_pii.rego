# beforeToolCall: redact PII (e-mail addresses) in a tool's input with a
# patch, before the call leaves the company. Compliance story; Think has no
# direct equivalent (its closest is the "allow with input" clamp example).
#
# Every top-level string field of an external tool's input that holds an
# e-mail address is replaced by the same text with each address masked.
# The tool runs with the patched input; the model's own input is kept in
# the stream and the audit log (the call's "input" vs the decision's).
package turngate.tool_call

# email matches an e-mail address (RE2 syntax).
email := `[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`

patch contains {"op": "replace", "path": concat("", ["/", key]), "value": masked} if {
	input.tool.name in data.pii.external_tools
	some key, value in input.tool.input
	is_string(value)
	regex.match(email, value)
	not contains(key, "/")
	not contains(key, "~")
	masked := regex.replace(value, email, "[email redacted]")
}
