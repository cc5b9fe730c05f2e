package turngate.tool_call

import rego.v1

block contains "at most 20 weather calls an hour" if {
	input.tool.name == "weather"
	input.state.weather_per_hour >= 20
}
