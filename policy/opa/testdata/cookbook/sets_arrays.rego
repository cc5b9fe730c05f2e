package turngate.tool_call

# Pitfall: sets and arrays. JSON (the input, data files) has only arrays;
# Rego's set operators (&, |, -) work on sets only, and an array never
# equals a set: ["prod"] == {"prod"} is false. Turn an array into a set
# with a comprehension before set operations, and sort a set before
# building a message from it (a set has no order).

deploy_protected := {"prod", "billing"}

deploy_targets := {t | some t in input.tool.input.targets}

block contains sprintf("deploy to %s needs a change ticket", [concat(", ", sort(protected))]) if {
	input.tool.name == "deploy"
	protected := deploy_targets & deploy_protected
	count(protected) > 0
}
