#!/usr/bin/env bash
# Shows a cached city answered from the cache and an uncached one running
# the tool.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat cached assistant "paris-$RUN" "What is the weather in Paris?"
expect "Paris is answered from the cache" data/cached.sse '"type":"tool-output-available".*"output":\{"cached":true,"celsius":24,"city":"Paris","forecast":"sunny"\}'
audit cached "paris-$RUN"
expect "the audit log records a substitute decision" data/cached.audit '"decision":\{"action":"substitute","output":\{"cached":true.*"hook":"beforeToolCall"'
expect "and a turn whose call was substituted" data/cached.audit '"kind":"turn".*"decision":"substitute"'

chat live assistant "lima-$RUN" "What is the weather in Lima?"
expect "Lima runs the weather tool" data/live.sse '"type":"tool-output-available".*"output":\{"city":"Lima","tempC":'
finish
