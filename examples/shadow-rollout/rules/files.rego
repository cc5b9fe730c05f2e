package turngate.tool_call

import rego.v1

block contains "delete is disabled in read-only mode" if {
	input.tool.name == "delete"
	input.body.mode == "read-only"
}

# METADATA
# title: no deletes under /etc
# custom:
#   shadow: true
block contains sprintf("deleting %s is not allowed", [input.tool.input.path]) if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/etc/")
}
