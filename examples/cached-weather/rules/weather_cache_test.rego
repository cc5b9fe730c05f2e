package turngate.tool_call_test

import data.turngate.tool_call

test_cached_city_is_substituted if {
	tool_call.substitute.output == {"city": "Paris", "forecast": "sunny", "celsius": 24, "cached": true} with input as {"tool": {"name": "weather", "input": {"city": "PARIS"}}}
}

test_uncached_city_runs_the_tool if {
	not tool_call.substitute with input as {"tool": {"name": "weather", "input": {"city": "Lima"}}}
}

test_cache_follows_the_data_file if {
	tool_call.substitute.output.forecast == "fog" with input as {"tool": {"name": "weather", "input": {"city": "Lima"}}}
		with data.weather_cache as {"lima": {"forecast": "fog"}}
}

test_other_tools_are_not_cached if {
	not tool_call.substitute with input as {"tool": {"name": "search", "input": {"city": "Paris"}}}
}
