package turngate.tool_result

redact contains "/secret" if input.outptu.secret

# input.body exists only before the call.
redact contains "" if input.body.mode == "strict"
