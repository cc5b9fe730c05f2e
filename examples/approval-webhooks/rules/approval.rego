# Deleting anything under /prod needs an approver with role ops; the chat
# user cannot approve it (the stream's approvalDescriptor says so).
package turngate.tool_call

approval contains {"reason": "deletes a production file", "approvers": ["role:ops"]} if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/prod/")
}
