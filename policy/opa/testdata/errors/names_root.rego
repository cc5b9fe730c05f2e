package turngat.tool_call

block contains "root misspelt" if input.tool.name == "delete"
