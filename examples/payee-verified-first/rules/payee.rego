package turngate.tool_call

import rego.v1

# For a wire_transfer, input.state.payee_verified is read for its own
# input.payee: the scope key takes the field from the call at hand.
block contains "verify the payee first: wire_transfer needs a successful verify_payee for it in this session" if {
	input.tool.name == "wire_transfer"
	not input.state.payee_verified.happened
}
