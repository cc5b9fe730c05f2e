package turngate.helpers

bad if input.tool.name == "rm"
