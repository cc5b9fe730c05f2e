#!/usr/bin/env bash
# Shows approval webhooks: a production delete waits for an ops approver
# and the approvers' receiver is told, in a signed POST; the chat client
# that reconnects meanwhile (GET …/chat/{id}/stream) is held open with
# keep-alives instead of a 204; olga approves through /v1/approvals, the
# receiver is told of the decision and the held stream shows it and the
# resumed turn to its end.
cd "$(dirname "$0")"
source ../lib.sh

export RECEIVER_SECRET=${RECEIVER_SECRET:-check-$RANDOM$RANDOM-0123456789abcdef}
export RECEIVER_PORT=${RECEIVER_PORT:-$(random_port)}
RECEIVER=http://127.0.0.1:$RECEIVER_PORT
echo "building the receiver…"
go build -o data/receiver ./receiver
background data/receiver -listen "127.0.0.1:$RECEIVER_PORT"
for _ in $(seq 1 100); do
	curl -sf "$RECEIVER/healthz" >/dev/null 2>&1 && break
	sleep 0.1
done
start_gateway
KEY=alice-7d0b3c1e94f25a6e8b1c4d7f0a3e6b92
OPS=olga-ops-4e8a1f6c3b9d2e7a5c0f8b1d4e7a2c96

# wait_events REGEX waits until the receiver's GET /events matches REGEX,
# saving it as data/events.json.
wait_events() {
	for _ in $(seq 1 100); do
		curl -s "$RECEIVER/events" >data/events.json
		grep -Eq -- "$1" data/events.json && return 0
		sleep 0.1
	done
}

# wait_file FILE REGEX waits until a line of FILE matches REGEX.
wait_file() {
	for _ in $(seq 1 100); do
		grep -Eq -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
}

echo "== alice asks for a production delete =="
S=prod-$RUN
chat ask files "$S" "delete /prod/db"
expect "the call waits for an ops approver" data/ask.sse '"type":"tool-approval-request".*"reason":"deletes a production file"'
expect "the stream says the chat user cannot answer it" data/ask.sse '"approvalDescriptor":\{"approvers":\["role:ops"\],"chatUserMayAnswer":false'
AID=$(field ask approvalId)
wait_events "\"approval.requested\",\"approval\":\\{\"id\":\"$AID\""
echo "── receiver: GET /events ──"
sed 's/^/  /' data/events.json
expect "the receiver verified and kept approval.requested" data/events.json "\"type\":\"approval.requested\",\"approval\":\\{\"id\":\"$AID\",\"sessionId\":\"$S\",\"toolName\":\"delete\",\"approvers\":\\[\"role:ops\"\\],\"state\":\"pending\""

echo "== alice's page reloads: the stream is held open =="
curl -sS -N --max-time 60 -H "Authorization: Bearer $KEY" "$BASE/v1/agents/files/chat/$S/stream" >data/held.sse &
BACKGROUND_PIDS+=($!)
HELD=$!
wait_file data/held.sse '^: keep-alive'
expect "the held stream replays the waiting message" data/held.sse '"type":"tool-approval-request","approvalId":"'"$AID"'"'
expect "and keeps the connection alive" data/held.sse '^: keep-alive$'
expect_no "nothing has resumed yet" data/held.sse '"type":"finish"'

echo "== olga approves =="
curl -sS -X POST -H "Authorization: Bearer $OPS" -H 'Content-Type: application/json' \
	-d '{"approved":true,"reason":"ticket 7"}' "$BASE/v1/approvals/$AID" >data/decide.json
expect "olga's decision counts" data/decide.json '"state":"approved"'
wait "$HELD" || true
stream_text data/held.sse >data/held.txt
show_stream held
expect "the held stream shows the decision" data/held.sse '"type":"tool-approval-response","approvalId":"'"$AID"'","approved":true,"reason":"ticket 7"'
expect "then the resumed turn: the tool ran" data/held.sse '"type":"tool-output-available".*"output":\{"deleted":"/prod/db"\}'
expect "and the model's answer, to its finish" data/held.txt 'The delete tool said: \{"deleted":"/prod/db"\}'
expect "the stream ends" data/held.sse '"type":"finish","finishReason":"stop"'

wait_events '"approval.decided"'
echo "── receiver: GET /events ──"
sed 's/^/  /' data/events.json
expect "the receiver was told who decided" data/events.json '"type":"approval.decided","approval":\{"id":"'"$AID"'".*"state":"approved","decidedBy":"olga","reason":"ticket 7"'
expect "no delivery failed its signature check" data/events.json '"rejected":0'
wait_file data/audit.log '"event":"approval.decided".*"outcome":"delivered"'
for e in requested decided; do
	expect "approval.$e's delivery is audited" data/audit.log '"approvalId":"'"$AID"'","attempts":1,"event":"approval.'$e'".*"kind":"notification","outcome":"delivered"'
done
finish
