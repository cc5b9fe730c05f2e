#!/usr/bin/env bash
# Starts two replicas on one PostgreSQL schema, starts a slow turn on the
# first and resumes its stream on the second while it runs.
#   PG_DSN=postgres://user@host:5432/db ./check.sh   (default: the local server's "test" database)
cd "$(dirname "$0")"
source ../lib.sh

# A fresh schema of its own, dropped at the end.
PG_DSN=${PG_DSN:-postgres://postgres@127.0.0.1:5432/test}
SCHEMA=example_replicas_$RUN
psql -q "$PG_DSN" -c "CREATE SCHEMA $SCHEMA" >/dev/null
export TURNGATE_EXAMPLE_PG_DSN="$PG_DSN?search_path=$SCHEMA"
REPLICA_B_PID=
drop_schema() {
	if [[ -n $REPLICA_B_PID ]]; then
		kill "$REPLICA_B_PID" 2>/dev/null || true
		wait "$REPLICA_B_PID" 2>/dev/null || true
	fi
	cleanup
	psql -q "$PG_DSN" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 || true
}
trap drop_schema EXIT

# Replica A: lib.sh's gateway on $PORT.
start_gateway
BASE_A=$BASE
# Replica B: the same binary and config on another port.
PORT_B=$((PORT + 1))
BASE_B=http://127.0.0.1:$PORT_B
"${TURNGATE:-$PWD/data/turngate}" serve --config turngate.yaml --listen "127.0.0.1:$PORT_B" >data/stdout-b.log 2>data/gateway-b.log &
REPLICA_B_PID=$!
for _ in $(seq 1 600); do
	curl -sf "$BASE_B/readyz" >/dev/null 2>&1 && break
	sleep 0.1
done
echo "replica A on $BASE_A, replica B on $BASE_B, one schema: $SCHEMA"
get ready-a /readyz >/dev/null
BASE=$BASE_B get ready-b /readyz >/dev/null
expect "replica A is ready" data/ready-a.json '"ready":true'
expect "replica B is ready" data/ready-b.json '"ready":true'

# The turn runs on A: a weather call, then a story streamed at 40 ms a chunk.
SESSION=story-$RUN
chat_body="{\"id\":\"$SESSION\",\"trigger\":\"submit-message\",\"messages\":[{\"id\":\"u1-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"tell me a story about Oslo\"}]}]}"
curl -sS -N -H 'Content-Type: application/json' -d "$chat_body" "$BASE_A/v1/agents/assistant/chat" >data/on-a.sse &
POST_PID=$!
# Once A streams the story, B is asked for the session's stream.
for _ in $(seq 1 200); do
	grep -q 'Once upon' data/on-a.sse 2>/dev/null && break
	sleep 0.05
done
curl -sS -N -o data/on-b.sse -w '%{http_code}\n' "$BASE_B/v1/agents/assistant/chat/$SESSION/stream" >data/on-b.status
wait "$POST_PID"
stream_text data/on-a.sse >data/on-a.txt
stream_text data/on-b.sse >data/on-b.txt
show_stream on-b

expect "B answered the resume with a stream" data/on-b.status '^200$'
expect "B's stream starts from A's first chunk (the start of the same message)" data/on-b.sse \
	"\"type\":\"start\",\"messageId\":\"$(field on-a messageId)\""
expect "and ends with [DONE]" data/on-b.sse '^data: \[DONE\]'
expect_same "B's stream spells out the same text as A's" data/on-a.txt data/on-b.txt
grep '^data: ' data/on-a.sse >data/on-a.data
grep '^data: ' data/on-b.sse >data/on-b.data
expect_same "chunk for chunk" data/on-a.data data/on-b.data

# Both replicas serve the stored answer (the transcript cache is coherent).
get history-a "/v1/agents/assistant/sessions/$SESSION/messages" >/dev/null
BASE=$BASE_B get history-b "/v1/agents/assistant/sessions/$SESSION/messages" >/dev/null
expect "A stores the story" data/history-a.json 'two gateways shared one database'
expect_same "B serves the same history as A" data/history-a.json data/history-b.json
finish
