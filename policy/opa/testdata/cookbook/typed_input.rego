# Read the model's input by its fields.
#
# Think (TypeScript), typed with an explicit TOOLS generic:
#   beforeToolCall(ctx: ToolCallContext) {
#     if (ctx.toolName === "search") { ctx.input.query; // typed as string }
#   }
#
# input.tool.input is the model's input, already validated against the
# tool's input schema (input.tool.schema) before the policy runs: for
# search, input.tool.input.query is a string. Here it refuses blank queries.
package turngate.tool_call

block contains "search needs a query" if {
	input.tool.name == "search"
	trim_space(input.tool.input.query) == ""
}
