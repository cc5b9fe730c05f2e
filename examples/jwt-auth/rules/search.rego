# The ordinary policy: searches fetch one result. A kill switch is not a
# rule: no file here sets or lifts one, and a reload leaves it in force.
package turngate.tool_call

import rego.v1

patch contains {"op": "replace", "path": "/limit", "value": 1} if {
	input.tool.name == "search"
	object.get(input.tool.input, "limit", 10) > 1
}
