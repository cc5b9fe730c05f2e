# Test rules for approvals: deleting under /tmp needs the chat user's
# approval, under /big an ops approver's.
package turngate.tool_call

approval contains "deletes a file" if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/tmp")
}

approval contains {"reason": "deletes a big file", "approvers": ["role:ops"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/big")
}
