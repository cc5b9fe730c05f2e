package turngate.tool_call

# Network and runtime builtins are refused when the rules are loaded.
block contains "upstream says no" if {
	resp := http.send({"method": "GET", "url": "https://policy.example.com/check"})
	resp.status_code != 200
}

block contains "private address" if {
	some addr in net.lookup_ip_addr(input.tool.input.host)
	net.cidr_contains("10.0.0.0/8", addr)
}

block contains "debug mode" if opa.runtime().env.DEBUG == "1"
