package turngate.tool_result

redacts contains "/password" if input.tool.name == "login"

block contains "too late to block" if input.tool.name == "login"
