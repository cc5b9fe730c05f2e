# tool_result: redact secrets in a tool's output before the model sees it.
# Compliance story; Think has no direct equivalent (its afterToolCall only
# observes).
#
# Two rules, for the two shapes secrets come in:
#   redact — fields whose name says they hold a secret become "[REDACTED]",
#            however deep they sit;
#   patch  — tokens with a known prefix inside any string are masked in
#            place, keeping the rest of the text.
# Patches apply first, then redactions.
package turngate.tool_result

secret_fields := {"password", "secret", "token", "api_key", "apikey", "access_token", "private_key"}

# token matches credentials with well-known prefixes (Stripe, GitHub).
token := `\b(sk_live|sk_test|ghp|gho)_[A-Za-z0-9]+`

redact contains pointer(path) if {
	walk(input.output, [path, _])
	count(path) > 0
	key := path[count(path) - 1]
	is_string(key)
	lower(key) in secret_fields
}

patch contains {"op": "replace", "path": pointer(path), "value": regex.replace(value, token, "[secret redacted]")} if {
	walk(input.output, [path, value])
	is_string(value)
	regex.match(token, value)
}

# pointer renders a walk path as an RFC 6901 JSON pointer.
pointer(path) := concat("", [sprintf("/%s", [segment(p)]) | some p in path])

segment(p) := replace(replace(p, "~", "~0"), "/", "~1") if is_string(p)

segment(p) := format_int(p, 10) if is_number(p)
