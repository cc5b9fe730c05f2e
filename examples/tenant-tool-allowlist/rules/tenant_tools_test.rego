package turngate.tool_call_test

import data.turngate.tool_call

test_acme_may_search if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "search", "input": {}}, "principal": {"tenant": "acme"}}
}

test_globex_may_not_search if {
	tool_call.block == {`tool "search" is not enabled for tenant "globex"`} with input as {"tool": {"name": "search", "input": {}}, "principal": {"tenant": "globex"}}
}

test_globex_may_check_the_weather if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "weather", "input": {}}, "principal": {"tenant": "globex"}}
}

test_unknown_tenant_may_call_nothing if {
	tool_call.block == {`tool "weather" is not enabled for tenant "initech"`} with input as {"tool": {"name": "weather", "input": {}}, "principal": {"tenant": "initech"}}
}

test_allow_list_follows_the_data_file if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "search", "input": {}}, "principal": {"tenant": "globex"}}
		with data.tenant_tools.globex as ["search"]
}
