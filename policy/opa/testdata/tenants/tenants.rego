package turngate.tool_call

# Each tenant may call only the tools on its allow-list (data.json); unknown
# tenants may call nothing.
block contains sprintf("tenant %q may not call %q", [input.principal.tenant, input.tool.name]) if {
	not input.tool.name in object.get(data.tenants, [input.principal.tenant, "tools"], [])
}

# Tool limits come from a YAML data document.
patch contains {"op": "replace", "path": "/limit", "value": max} if {
	max := data.limits[input.tool.name]
	input.tool.input.limit > max
}
