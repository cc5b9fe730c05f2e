# beforeToolCall: log all tool calls.
#
# Think: beforeToolCall(ctx) { console.log(`Tool called: ${ctx.toolName}`, ctx.input); }
#
# No decision is needed: the gateway writes every beforeToolCall evaluation
# to the audit log (tool, call id, step, decision, rules fired, revision),
# and every turn's record lists each call's input, output and decision —
# what afterToolCall sees. This policy only declares the decision document
# so that calls are evaluated (outcome "no_match": allowed), and prints a
# line that `turngate eval` and the admin dry run show while you write
# rules. print() never writes to the gateway's logs.
package turngate.tool_call

logged if {
	print("Tool called:", input.tool.name, input.tool.input)
}
