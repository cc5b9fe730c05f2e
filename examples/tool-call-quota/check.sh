#!/usr/bin/env bash
# Shows three searches in one turn: two run, the third is blocked.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat compare analyst "quota-$RUN" "compare phones, tablets and laptops"
expect "the first search runs" data/compare.sse '"type":"tool-output-available","toolCallId":"call_0_0","output":\{"limit":1,"query":"phones"'
expect "the second search runs" data/compare.sse '"type":"tool-output-available","toolCallId":"call_0_1","output":\{"limit":1,"query":"tablets"'
expect "the third is blocked" data/compare.sse '"type":"tool-output-available","toolCallId":"call_0_2","output":"search may run at most 2 times per turn"'
expect "the model says its answer is partial" data/compare.txt 'search quota'
audit compare "quota-$RUN"
expect "the audit log records the block" data/compare.audit '"action":"block".*"hook":"beforeToolCall".*"toolCallId":"call_0_2"'
finish
