package turngate.tool_call_test

import data.turngate.tool_call

test_atlantis_blocked if {
	tool_call.block == {"Atlantis has no weather service"} with input as {"tool": {"name": "weather", "input": {"city": "Atlantis"}}}
}

test_other_cities_allowed if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "weather", "input": {"city": "Oslo"}}}
}
