package turngate.tool_call

import rego.v1

# The replicas load the same rules: a call either replica runs is decided
# the same way. Nobody checks the weather in Atlantis.
block contains "Atlantis has no weather service" if {
	input.tool.name == "weather"
	input.tool.input.city == "Atlantis"
}
