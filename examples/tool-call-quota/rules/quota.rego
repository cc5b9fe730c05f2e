# beforeToolCall: at most N calls of a tool per turn. Compliance story;
# Think has no direct equivalent.
#
# input.previousCalls lists the turn's earlier calls in call order (also
# those of the same step), each with its decision; blocked calls do not
# count against the quota.
package turngate.tool_call

block contains sprintf("%s may run at most %d times per turn", [input.tool.name, limit]) if {
	limit := data.quota[input.tool.name]
	used := count([c | some c in input.previousCalls; c.toolName == input.tool.name; c.decision != "block"])
	used >= limit
}
