package turngate.tool_call

import rego.v1

# Other OPA integrations' decision names decide nothing here.
deny contains "no deletes" if input.tool.name == "delete"

default allow := false

allow if "admin" in input.principal.roles

warn contains "big" if input.tool.input.limit > 100

violation contains msg if {
	input.tool.name == "rm"
	msg := "no rm"
}
