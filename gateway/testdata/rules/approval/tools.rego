# Test rules for approvals: deleting under /tmp needs the chat user's
# approval, under /big an ops approver's (never the principal who asked),
# under /shared an ops approver's or the asker's own.
package turngate.tool_call

approval contains "deletes a file" if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/tmp")
}

approval contains {"reason": "deletes a big file", "approvers": ["role:ops"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/big")
}

# Under /shared, ops approves, and so may the principal who asked.
approval contains {"reason": "deletes a shared file", "approvers": ["role:ops", "requester"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/shared")
}
