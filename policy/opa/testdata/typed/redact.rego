package turngate.tool_result

redact contains 1 if input.success

redact contains {"path": "/a"} if input.executed
