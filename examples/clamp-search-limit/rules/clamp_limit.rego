# beforeToolCall: sanitize the model's input before execution — clamp a
# search limit.
#
# Think:
#   if (ctx.toolName === "search") {
#     const input = ctx.input as { query: string; limit?: number };
#     return { action: "allow", input: { ...input, limit: Math.min(input.limit ?? 10, 50) } };
#   }
#
# Here two RFC 6902 JSON-Patch ops: cap a limit above the maximum, default a
# missing one. The tool runs with the patched input, which the gateway
# re-validates against the tool's schema (Think does not).
package turngate.tool_call

patch contains {"op": "replace", "path": "/limit", "value": data.limits.search_max} if {
	input.tool.name == "search"
	input.tool.input.limit > data.limits.search_max
}

patch contains {"op": "add", "path": "/limit", "value": data.limits.search_default} if {
	input.tool.name == "search"
	not "limit" in object.keys(input.tool.input)
}
