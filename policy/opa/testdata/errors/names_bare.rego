package tool_call

block contains "no root at all" if input.tool.name == "delete"
