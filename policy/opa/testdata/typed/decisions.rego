package turngate.tool_call

block contains 42 if input.tool.name == "x"

block contains input.stepNumber if input.tool.name == "y"

substitute := "cached" if input.tool.name == "weather"

patch contains "/limit" if input.tool.name == "search"

patch contains {"op": 1, "path": "/x", "value": 2} if input.tool.name == "z"
