#!/usr/bin/env bash
# Shows a limit of 500 clamped to 50, and a missing limit defaulted to 10.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat greedy assistant "greedy-$RUN" "search everything about turngate"
expect "the model asked for 500 results" data/greedy.sse '"type":"tool-input-available".*"input":\{"limit":500,'
expect "the tool ran with limit 50" data/greedy.sse '"type":"tool-output-available".*"output":\{"limit":50,'
audit greedy "greedy-$RUN"
expect "the audit log records the rewrite" data/greedy.audit '"decision":\{"action":"allow","input":\{"limit":50,"query":"turngate"\}\}.*"hook":"beforeToolCall"'

chat quick assistant "quick-$RUN" "quick search turngate"
expect "a missing limit defaults to 10" data/quick.sse '"type":"tool-output-available".*"output":\{"limit":10,'
finish
