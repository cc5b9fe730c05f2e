# The console's Overview shows these tests and what they cover.
package turngate.tool_call_test

import data.turngate.tool_call

test_delete_under_etc_blocked if {
	"no deletes under /etc" in tool_call.block with input as {"tool": {"name": "delete", "input": {"path": "/etc/passwd"}}}
}
