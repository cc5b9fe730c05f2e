package turngate.tool_call

import data.limits

# A nested data key, through an import.
block contains "too many" if count(input.previousCalls) > limits.serch

# The items of a data array and of an input array are typed.
block contains "risky" if {
	some t in data.catalog
	t.nmae == input.tool.name
}

block contains "repeat" if {
	some c in input.previousCalls
	c.toolname == input.tool.name
}

# A field of the tool_result input is not in the tool_call input.
block contains "failed" if input.success == false

# A string has no fields.
block contains "first" if input.tool.name.first == "x"
