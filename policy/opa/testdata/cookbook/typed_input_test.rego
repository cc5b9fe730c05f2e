package turngate.tool_call_test

import data.turngate.tool_call

test_blank_query_is_blocked if {
	"search needs a query" in tool_call.block with input as {"tool": {"name": "search", "input": {"query": "  "}}}
}

test_query_passes if {
	not "search needs a query" in tool_call.block with input as {"tool": {"name": "search", "input": {"query": "go"}}}
}
