package turngate.tool_call

import rego.v1

# The candidate: delete needs an admin whatever the mode, and search is
# clamped to 20 results instead of 50.
block contains "delete needs an admin" if {
	input.tool.name == "delete"
	not "admin" in input.principal.roles
}

patch contains {"op": "replace", "path": "/limit", "value": 20} if {
	input.tool.name == "search"
	input.tool.input.limit > 20
}
