#!/usr/bin/env bash
# Shows every tool call of a turn in the audit log, and the print line in a
# dry run.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat trip assistant "trip-$RUN" "Plan a trip to Lisbon"
audit trip "trip-$RUN"
expect "a beforeToolCall record for the weather call" data/trip.audit '"hook":"beforeToolCall".*"outcome":"no_match".*"toolCallId":"call_0_0",("toolKind":"[a-z]*",)?"toolName":"weather"'
expect "a beforeToolCall record for the search call" data/trip.audit '"hook":"beforeToolCall".*"outcome":"no_match".*"toolCallId":"call_0_1",("toolKind":"[a-z]*",)?"toolName":"search"'
expect "the turn record lists both calls with input, output and decision" data/trip.audit \
	'"kind":"turn".*"toolCalls":\[\{"decision":"allow","input":\{"city":"Lisbon"\},"output":\{.*\{"decision":"allow","input":\{"limit":2,"query":"things to do in Lisbon"\},"output":'

echo "── dry run: POST /v1/admin/rules/eval ──"
post eval /v1/admin/rules/eval "{\"hook\":\"beforeToolCall\",\"input\":$(cat call.json)}"
grep -o '"prints":\[[^]]*\]' data/eval.out | sed 's/^/  /'
expect "the dry run shows the print line" data/eval.out '"prints":\[".*Tool called: weather \{\\"city\\": \\"Oslo\\"\}"'
finish
