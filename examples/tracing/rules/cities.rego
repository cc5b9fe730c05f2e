# beforeToolCall: the weather tool answers for real cities only. Its
# decision is recorded on the tool call's span as a turngate.policy.decision
# event (revision, outcome, rules fired), so a trace shows why a call ran or
# was blocked.
package turngate.tool_call

block contains "Atlantis is not a real city." if {
	input.tool.name == "weather"
	lower(input.tool.input.city) == "atlantis"
}
