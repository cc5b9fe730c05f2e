# Deletes under /etc are blocked; under /prod they wait for an approver
# with role ops.
package turngate.tool_call

block contains "no deletes under /etc" if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/etc/")
}

approval contains {"reason": "deletes a production file", "approvers": ["role:ops"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/prod/")
}
