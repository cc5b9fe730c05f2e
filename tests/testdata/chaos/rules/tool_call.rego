package turngate.tool_call

import rego.v1

# Every call is allowed: the test is about the journal, not the policy.
block contains "never" if false
