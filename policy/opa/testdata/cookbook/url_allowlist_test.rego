package turngate.tool_call_test

import data.turngate.tool_call

fetch(url) := {"tool": {"name": "fetch", "input": {"url": url}}}

fetch_blocked(url) if "fetch may only reach the allow-listed https hosts" in tool_call.block with input as fetch(url)

test_allowed_urls_run if {
	not fetch_blocked("https://api.example.com/v1/items?q=1")
	not fetch_blocked("HTTPS://API.Example.COM/v1")
	not fetch_blocked("https://docs.example.com:443/guide#intro")
}

test_other_hosts_are_blocked if {
	fetch_blocked("https://evil.com/")
	fetch_blocked("https://api.example.com.evil.com/")
	fetch_blocked("https://evil.com/api.example.com")
	fetch_blocked("https://evil.com?x=api.example.com")
	fetch_blocked("https://evil.com#api.example.com")
}

test_userinfo_tricks_are_blocked if {
	fetch_blocked("https://api.example.com@evil.com/")
	fetch_blocked("https://api.example.com:443@evil.com/")
	fetch_blocked("https://user:pass@api.example.com/")
}

test_scheme_and_port_are_checked if {
	fetch_blocked("http://api.example.com/")
	fetch_blocked("https://api.example.com:8443/")
	fetch_blocked("//api.example.com/")
	fetch_blocked("api.example.com/v1")
}

test_non_urls_are_blocked if {
	fetch_blocked("https://api.example.com\\@evil.com/")
	fetch_blocked("https://[::1/")
	fetch_blocked(42)
	"fetch may only reach the allow-listed https hosts" in tool_call.block with input as {"tool": {"name": "fetch", "input": {}}}
}
