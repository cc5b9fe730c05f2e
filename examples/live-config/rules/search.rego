# The ordinary policy: searches fetch one result. This example changes the
# config, not the rules: they are the same before and after each edit.
package turngate.tool_call

import rego.v1

patch contains {"op": "replace", "path": "/limit", "value": 1} if {
	input.tool.name == "search"
	object.get(input.tool.input, "limit", 10) > 1
}
