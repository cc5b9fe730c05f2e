# The policy of ../bench/tool_call.rego with the walk over the tool input
# shared: one helper rule, input_strings, walks it once per decision (OPA keeps a
# rule's value for the rest of an evaluation) and the twelve rules that
# looked at every string iterate over it. Same decisions; the benchmark
# (BenchmarkDecisionPath/shared) shows what the shape saves.
package turngate.tool_call

tenant := data.tenants[input.principal.tenant]

tool := data.catalogue[input.tool.name]

grant := tenant.tools[input.tool.name]

# input_strings holds [path, value] for every string in the tool input.
input_strings contains [path, value] if {
	walk(input.tool.input, [path, value])
	is_string(value)
}

# where renders a walk path as a JSON pointer.
where(path) := concat("", [sprintf("/%v", [p]) | some p in path])

block contains msg if {
	some [path, value] in input_strings
	regex.match(`AKIA[0-9A-Z]{16}`, value)
	msg := sprintf("%s holds an AWS access key id", [where(path)])
}

block contains msg if {
	some [path, value] in input_strings
	regex.match(`gh[pousr]_[A-Za-z0-9]{36}`, value)
	msg := sprintf("%s holds a GitHub token", [where(path)])
}

block contains msg if {
	some [path, value] in input_strings
	regex.match(`-----BEGIN [A-Z ]*PRIVATE KEY-----`, value)
	msg := sprintf("%s holds a private key", [where(path)])
}

block contains msg if {
	some [path, value] in input_strings
	regex.match(`xox[baprs]-[0-9A-Za-z-]{10,}`, value)
	msg := sprintf("%s holds a Slack token", [where(path)])
}

block contains msg if {
	some [path, value] in input_strings
	regex.match(`eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`, value)
	msg := sprintf("%s holds a JSON web token", [where(path)])
}

block contains msg if {
	not tenant.pii
	some [path, value] in input_strings
	regex.match(`\b\d{3}-\d{2}-\d{4}\b`, value)
	msg := sprintf("%s holds a social security number and tenant %s may not send PII", [where(path), input.principal.tenant])
}

block contains msg if {
	not tenant.pii
	some [path, value] in input_strings
	regex.match(`\b(?:\d[ -]?){13,16}\b`, value)
	msg := sprintf("%s looks like a card number and tenant %s may not send PII", [where(path), input.principal.tenant])
}

block contains msg if {
	not tenant.pii
	some [path, value] in input_strings
	regex.match(`\b[A-Z]{2}\d{2}[A-Z0-9]{11,30}\b`, value)
	msg := sprintf("%s looks like an IBAN and tenant %s may not send PII", [where(path), input.principal.tenant])
}

block contains msg if {
	some [path, value] in input_strings
	parts := regex.find_all_string_submatch_n(`^https?://([^/:?#]+)`, value, 1)
	count(parts) > 0
	host := parts[0][1]
	not host in tenant.allowedHosts
	msg := sprintf("%s calls host %s, which tenant %s does not allow", [where(path), host, input.principal.tenant])
}

block contains msg if {
	some [path, value] in input_strings
	count(value) > grant.maxLength
	msg := sprintf("%s is %d characters long, over the %d tool %s allows", [where(path), count(value), grant.maxLength, input.tool.name])
}

block contains msg if {
	some [path, value] in input_strings
	regex.match(`(?i)\b(drop\s+table|rm\s+-rf|shutdown\s+-h)\b`, value)
	msg := sprintf("%s holds a destructive command", [where(path)])
}

block contains msg if {
	not tenant
	msg := sprintf("tenant %s is unknown", [input.principal.tenant])
}

block contains msg if {
	not tool
	msg := sprintf("tool %s is not in the catalogue", [input.tool.name])
}

block contains msg if {
	tenant
	not grant
	msg := sprintf("tenant %s has no grant for tool %s", [input.principal.tenant, input.tool.name])
}

block contains msg if {
	grant.enabled == false
	msg := sprintf("tool %s is disabled for tenant %s", [input.tool.name, input.principal.tenant])
}

block contains msg if {
	n := count([c | some c in input.previousCalls; c.toolName == input.tool.name])
	n >= grant.maxCalls
	msg := sprintf("tool %s was already called %d times this turn (limit %d)", [input.tool.name, n, grant.maxCalls])
}

block contains msg if {
	n := count([c | some c in input.previousCalls; c.decision == "block"])
	n >= tenant.maxBlocked
	msg := sprintf("%d earlier calls were blocked this turn (limit %d)", [n, tenant.maxBlocked])
}

block contains msg if {
	tool.risk == "high"
	not "admin" in input.principal.roles
	msg := sprintf("tool %s is high risk and %s is not an admin", [input.tool.name, input.principal.subject])
}

block contains msg if {
	not tenant.region in tool.regions
	msg := sprintf("tool %s does not run in region %s of tenant %s", [input.tool.name, tenant.region, input.principal.tenant])
}

patch contains {"op": "replace", "path": where(path), "value": "[email]"} if {
	tenant.maskEmails
	some [path, value] in input_strings
	regex.match(`^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$`, value)
}
