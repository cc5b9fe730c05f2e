package turngate.tool_call

# Pitfall: undefined values under `not`. Written as
#
#     not lower(input.tool.input.region) in transfer_regions
#
# the rule never fires when the model leaves region out: lower() of an
# undefined value is undefined, OPA evaluates the call before the `not`,
# and so the whole rule body is undefined. Negate a helper rule instead: it
# is undefined, and `not` holds, whether region is missing, not a string or
# not in the set. (is_string keeps lower() from failing on a number: builtin
# errors are strict, and an error fails the call closed without the reason.)

transfer_regions := {"eu", "us"}

transfer_region_allowed if {
	region := input.tool.input.region
	is_string(region)
	lower(region) in transfer_regions
}

block contains "transfer needs an allowed region (eu or us)" if {
	input.tool.name == "transfer"
	not transfer_region_allowed
}
