package turngate.tool_result

import rego.v1

redact contains "/token" if input.output.token

# METADATA
# title: hide emails
# custom:
#   shadow: true
redact contains "/email" if input.output.email
