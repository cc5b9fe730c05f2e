#!/usr/bin/env bash
# Shows a normal turn waiting out the slow upstream, and a recovery turn
# failing fast on the chunk timeout.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat normal assistant "normal-$RUN" "hello"
expect "a normal turn waits for the slow stream and completes" data/normal.txt '^Here is your answer\.$'

chat recovering assistant "recover-$RUN" "hello again" '"recovering":true'
expect "a recovery turn fails on the chunk timeout" data/recovering.sse '"type":"error","errorText":"model stream stalled: no chunk for 100ms \(timeout.chunkMs\)"'
audit recovering "recover-$RUN"
expect "the audit log shows no retries and the timeout" data/recovering.audit \
	'"decision":\{"maxRetries":0,"timeout":\{"chunkMs":100,"totalMs":30000\}\}.*"hook":"beforeTurn"'
expect "and the turn ending in error" data/recovering.audit '"kind":"turn".*"status":"error"'
finish
