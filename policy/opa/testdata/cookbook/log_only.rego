# Log all tool calls.
#
# Think (TypeScript):
#   console.log(`Tool called: ${ctx.toolName}`, ctx.input);
#
# No rule is needed: every beforeToolCall evaluation is written to the audit
# log (tool, call id, input, decision, rules fired, duration). While writing
# rules, print() output shows up in `turngate eval` and `turngate test`.
package turngate.tool_call
