# The candidate: deletes under /etc are no longer blocked (only /etc/shadow).
package turngate.tool_call

block contains "no deleting the shadow file" if {
	input.tool.name == "delete"
	input.tool.input.path == "/etc/shadow"
}

approval contains {"reason": "deletes a production file", "approvers": ["role:ops"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/prod/")
}
