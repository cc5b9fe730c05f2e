# Default tool_result policy: what the model sees after a tool ran. The
# gateway evaluates data.turngate.tool_result with the call and its output
# as input. Rules:
#   patch contains op      RFC 6902 ops applied to the output
#   redact contains path   the value at each JSON pointer becomes "[REDACTED]"
# The audit log keeps the original output (afterToolCall); only the model's
# view changes.
package turngate.tool_result

import rego.v1

# Field names whose values never reach the model, whatever tool returned
# them and however deep they sit in its output. Compared lower-cased.
secret_fields := {
	"secret", "client_secret", "password", "passwd", "token", "access_token",
	"refresh_token", "api_key", "apikey", "authorization", "private_key",
}

redact contains pointer if {
	walk(input.output, [path, _])
	count(path) > 0
	key := path[count(path) - 1]
	is_string(key)
	lower(key) in secret_fields
	pointer := json_pointer(path)
}

# json_pointer renders a walk path as an RFC 6901 JSON pointer.
json_pointer(path) := concat("", [sprintf("/%s", [segment(p)]) | some p in path])

segment(p) := replace(replace(p, "~", "~0"), "/", "~1") if is_string(p)

segment(p) := format_int(p, 10) if is_number(p)
