package turngate.tool_call

block contains "no deletes" if input.tool.name == "delet"

block contains "search is fine" if {
	"search" == input.tool.name
	input.tool.input.limit > 100
}

block contains "no money" if input.tool.name in {"transfer", "delete"}

block contains "after a search" if {
	some c in input.previousCalls
	c.toolName == "serch"
}
