package turngate.tool_call

import rego.v1

# Charges above the limit need a person; this shop sells nothing that
# expensive, so the rule is here to show that a re-run decides again: the
# policy runs on every run of the turn, the journal only spares the tool.
block contains "charges above 1000 need a person" if {
	input.tool.name == "charge"
	input.tool.input.amount > 1000
}
