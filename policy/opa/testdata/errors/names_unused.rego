package turngate.toolcall

block contains "never enforced" if input.tool.name == "delete"
