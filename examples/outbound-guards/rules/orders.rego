# beforeToolCall: the model chooses what goes out to the partner. An order
# id is letters, digits and dashes, so a call cannot carry a URL, a path or
# a paragraph of the conversation to the partner's API.
package turngate.tool_call

import rego.v1

block contains "an order id is letters, digits and dashes" if {
	input.tool.name == "lookup"
	not regex.match(`^[A-Za-z0-9-]{1,32}$`, input.tool.input.order)
}
