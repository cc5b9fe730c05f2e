package turngate.tool_result

import rego.v1

# Read by a decision, OPA's allow is a helper like any other.
default allow := false

allow if input.tool.name == "search"

redact contains "/secret" if not allow
