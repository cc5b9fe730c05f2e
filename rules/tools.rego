# Default beforeToolCall policy. The gateway evaluates the document
# data.turngate.tool_call for every tool call, with the call as input (see
# README.md for every input field). Decision rules, in precedence order:
#   block contains reason     the call is refused; the model sees the reasons
#   substitute := {"output"}  the tool does not run; the model sees output
#   patch contains op         the tool runs with the RFC 6902-patched input
#   (nothing)                 the tool runs with the model's input
package turngate.tool_call

import rego.v1

# A client marks a session read-only with {"mode": "read-only"} in the
# request body; destructive tools are then refused.
block contains "delete is disabled in read-only mode" if {
	input.tool.name == "delete"
	input.body.mode == "read-only"
}

# The model may ask search for any page size; the backend serves at most
# data.limits.search results, so larger requests are clamped rather than
# failed. The patched input is re-validated against the tool's schema.
patch contains {"op": "replace", "path": "/limit", "value": data.limits.search} if {
	input.tool.name == "search"
	input.tool.input.limit > data.limits.search
}
