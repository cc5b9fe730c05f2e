package turngate.tool_call

import input.state as st
import rego.v1

# object.get's default hides a misspelt name from the type checker: each
# of these read 0 on every call.
block contains "direct" if object.get(input.state, "emails_per_hou", 0) >= 20

block contains "alias" if object.get(st, ["emails_per_our"], 0) >= 20

block contains "variable" if {
	s := input.state
	n := object.get(s, "email_per_hour", 0)
	n >= 20
}

# Declared names are fine.
block contains "declared" if object.get(input.state, "emails_per_hour", 0) >= 20

# The type checker follows input.state into a variable and an import alias.
block contains "variable dot" if {
	s := input.state
	s.emails_per_hou >= 20
}

block contains "alias dot" if st.emails_per_hou >= 20
