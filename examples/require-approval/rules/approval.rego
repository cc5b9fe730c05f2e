# Deleting needs a person's approval: the chat user's for ordinary paths,
# an ops approver's for anything under /prod.
package turngate.tool_call

approval contains "deletes a file" if {
	input.tool.name == "delete"
	not startswith(input.tool.input.path, "/prod/")
}

approval contains {"reason": "deletes a production file", "approvers": ["role:ops"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/prod/")
}
