# Test rules for the session configuration: a memory write that holds a
# secret is blocked (the gateway's update_context tool has kind "context").
package turngate.tool_call

block contains "memory writes must not hold secrets" if {
	input.tool.kind == "context"
	contains(lower(input.tool.input.content), "password")
}
