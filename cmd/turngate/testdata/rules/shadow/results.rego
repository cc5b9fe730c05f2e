package turngate.tool_result

import rego.v1

redact contains "/secret" if input.output.secret

# METADATA
# title: hide hit counts
# custom:
#   shadow: true
redact contains "/hits" if input.output.hits > 2
