# Sanitize the model's input before execution: clamp a search limit.
#
# Think (TypeScript):
#   if (ctx.toolName === "search") {
#     const input = ctx.input as { query: string; limit?: number };
#     return { action: "allow", input: { ...input, limit: Math.min(input.limit ?? 10, 50) } };
#   }
#
# Here two JSON-Patch (RFC 6902) ops: cap a limit above 50, default a missing
# limit to 10. The call runs with the patched input.
package turngate.tool_call

patch contains {"op": "replace", "path": "/limit", "value": 50} if {
	input.tool.name == "search"
	input.tool.input.limit > 50
}

patch contains {"op": "add", "path": "/limit", "value": 10} if {
	input.tool.name == "search"
	not "limit" in object.keys(input.tool.input)
}
