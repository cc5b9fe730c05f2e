# The ordinary policy: a search fetches at most 3 results. The quotas are
# configuration (turngate.yaml), not rules: no Rego counts tokens here.
package turngate.tool_call

import rego.v1

patch contains {"op": "add", "path": "/limit", "value": 3} if {
	input.tool.name == "search"
	object.get(input.tool.input, "limit", 100) > 3
}
