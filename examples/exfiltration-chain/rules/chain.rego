package turngate.tool_call

import rego.v1

approval contains "this session has read a secret: posting out needs approval" if {
	input.tool.name == "http_post"
	input.state.secret_read.happened
}
