#!/usr/bin/env bash
# Shows a delete blocked in read-only mode and allowed otherwise.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

S=ro-$RUN
chat blocked files "$S" "delete notes.txt" '"mode":"read-only"'
expect "the delete call is answered with the block reason" data/blocked.sse '"type":"tool-output-available".*"output":"delete is disabled in read-only mode"'
expect "the model relays the reason" data/blocked.txt 'read-only mode'
audit blocked "$S"
expect "the audit log records the block decision" data/blocked.audit '"decision":\{"action":"block".*"hook":"beforeToolCall"'

chat allowed files "rw-$RUN" "delete notes.txt"
expect "without the mode the tool runs" data/allowed.sse '"output":\{"deleted":"notes.txt"\}'
finish
