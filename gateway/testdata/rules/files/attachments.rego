# Test rules for file parts: no tool runs on a turn that brought a remote
# file.
package turngate.tool_call

block contains "tools do not run on turns with remote files" if {
	some a in input.attachments
	a.remote
}
