package turngate.tool_call_test

import data.turngate.tool_call

test_cached_city_is_substituted if {
	tool_call.substitute.output.forecast == "sunny" with input as {"tool": {"name": "weather", "input": {"city": "Paris"}}}
}

test_uncached_city_runs_the_tool if {
	not tool_call.substitute with input as {"tool": {"name": "weather", "input": {"city": "Lima"}}}
}
