package turngate.tool_call

import rego.v1

block contains "too many calls a minute" if input.state.calls_per_minute >= 1000000000

block contains "too many calls in the session" if input.state.session_calls >= 1000000000

block contains "too many calls of the tool today" if input.state.tool_calls_today >= 1000000000
