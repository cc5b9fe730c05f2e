package turngate.tool_call

import rego.v1

# Enforced: no deletes in read-only mode.
block contains "delete is disabled in read-only mode" if {
	input.tool.name == "delete"
	input.body.mode == "read-only"
}

# METADATA
# title: no deletes under /etc
# custom:
#   shadow: true
block contains sprintf("deleting %s is not allowed", [input.tool.input.path]) if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/etc/")
}

# METADATA
# custom:
#   shadow: true
patch contains {"op": "replace", "path": "/limit", "value": 20} if {
	input.tool.name == "search"
	input.tool.input.limit > 20
}

# METADATA
# title: cached weather
# custom:
#   shadow: true
substitute := {"output": {"city": input.tool.input.city, "celsius": 21}} if {
	input.tool.name == "weather"
	input.tool.input.city == "Paris"
}

# METADATA
# title: broken
# custom:
#   shadow: true
block contains "never" if {
	input.tool.name == "divide"
	1 / input.tool.input.by > 0
}

# METADATA
# title: transfers need finance
# custom:
#   shadow: true
approval contains {"reason": "moves money", "approvers": ["role:finance"]} if input.tool.name == "transfer"
