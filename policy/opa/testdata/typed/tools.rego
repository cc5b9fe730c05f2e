# rules/tools.rego with the two typos of issue 11: a misspelt input field
# and a misspelt data document.
package turngate.tool_call

block contains "delete is disabled in read-only mode" if {
	input.tool.nmae == "delete"
	input.body.mode == "read-only"
}

patch contains {"op": "replace", "path": "/limit", "value": data.limits.search} if {
	input.tool.name == "search"
	input.tool.input.limit > data.limit.search
}
