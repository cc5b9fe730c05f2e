package turngate.tool_call_test

import data.turngate.tool_call

test_atlantis_is_blocked if {
	tool_call.block["Atlantis is not a real city."] with input as {"tool": {"name": "weather", "input": {"city": "Atlantis"}}}
}

test_paris_runs if {
	count(tool_call.block) == 0 with input as {"tool": {"name": "weather", "input": {"city": "Paris"}}}
}
