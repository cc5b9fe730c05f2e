package turngate.tool_call

import input.state as st
import rego.v1

# No state is declared (the declaration file is missing or misnamed): each
# of these read nothing, the limit off.
block contains "direct" if input.state.emails_per_hour >= 20

block contains "alias" if st.emails_per_hour >= 20

block contains "object.get" if object.get(input.state, "emails_per_hour", 0) >= 20
