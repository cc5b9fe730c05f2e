package turngate.tool_result

import rego.v1

redact contains "/secret" if input.output.secret
