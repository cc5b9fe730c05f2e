package turngate.tool_call

# Recipe: allow-list the host of a URL a tool is called with. uri.parse
# (Go's net/url) splits the URL; compare its parts exactly, never the raw
# string with startswith/contains: "https://api.example.com@evil.com" has
# host evil.com (api.example.com is a user name), and
# "https://api.example.com.evil.com" is evil.com's. Hostname and scheme
# are case-insensitive; the port must be the scheme's default; a URL with
# credentials is refused outright. Anything that is not such a URL —
# missing, not a string, unparsable — leaves fetch_url_ok undefined, so the
# call is blocked.

fetch_hosts := {"api.example.com", "docs.example.com"}

fetch_url := u if {
	u := input.tool.input.url
	is_string(u)
	uri.is_valid(u)
}

# fetch_authority is what comes between "scheme://" and the path: where
# credentials ("user:pass@") would be.
fetch_authority := a if {
	[_, a] := regex.find_all_string_submatch_n(`^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)`, fetch_url, 1)[0]
}

fetch_url_ok if {
	parts := uri.parse(fetch_url)
	lower(parts.scheme) == "https"
	lower(parts.hostname) in fetch_hosts
	object.get(parts, "port", "443") == "443"
	not contains(fetch_authority, "@")
}

block contains "fetch may only reach the allow-listed https hosts" if {
	input.tool.name == "fetch"
	not fetch_url_ok
}
