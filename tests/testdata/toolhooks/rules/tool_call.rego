package turngate.tool_call

# The rules run for every call (the decision records say no_match); the
# only block is of a tool no agent has, so every call of the test runs.
block contains "never" if input.tool.name == "never"
