# beforeToolCall: tenant-specific tool allow-lists from a data file.
# Compliance story; Think has no direct equivalent.
#
# The caller's tenant comes from its API key (auth.apiKeys), never from the
# request body, so a client cannot claim another tenant's tools.
package turngate.tool_call

block contains sprintf("tool %q is not enabled for tenant %q", [input.tool.name, input.principal.tenant]) if {
	not allowed
}

allowed if input.tool.name in data.tenant_tools[input.principal.tenant]
