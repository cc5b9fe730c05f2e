# beforeToolCall: block a tool when the agent is in a restricted mode.
#
# Think (TypeScript):
#   if (this.isReadOnlyMode && ctx.toolName === "delete")
#     return { action: "block", reason: "delete is disabled in read-only mode" };
#
# Here the mode comes from the client request's custom body
# ({"mode": "read-only"}); the model sees the reason as the tool's output.
package turngate.tool_call

block contains "delete is disabled in read-only mode" if {
	input.tool.name == "delete"
	input.body.mode == "read-only"
}
