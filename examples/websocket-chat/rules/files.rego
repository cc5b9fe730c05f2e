# beforeToolCall: nothing under /etc/ is deleted, whichever transport the
# turn came in on (POST chat or the WebSocket); the model sees the reason
# as the tool's output.
package turngate.tool_call

block contains sprintf("deleting %s is not allowed", [input.tool.input.path]) if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/etc/")
}
