package turngate.tool_call_test

import rego.v1

import data.turngate.tool_call

delete(path, body) := {"tool": {"name": "delete", "input": {"path": path}}, "body": body}

test_read_only_delete_blocked if {
	"delete is disabled in read-only mode" in tool_call.block with input as delete("notes.txt", {"mode": "read-only"})
}

test_ordinary_delete_runs if {
	count(tool_call.block) == 0 with input as delete("notes.txt", {})
}

# Tests see shadow rules as enforced: this is what promotion will do.
test_etc_delete_would_be_blocked if {
	"deleting /etc/hosts is not allowed" in tool_call.block with input as delete("/etc/hosts", {})
}
