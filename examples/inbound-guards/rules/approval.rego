# Deleting a production file needs an ops approver other than the one who
# asked; deleting a shared file an ops approver or the asker.
package turngate.tool_call

approval contains {"reason": "deletes a production file", "approvers": ["role:ops"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/prod/")
}

approval contains {"reason": "deletes a shared file", "approvers": ["role:ops", "requester"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/shared/")
}
