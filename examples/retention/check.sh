#!/usr/bin/env bash
# Shows retention: two of acme's sessions are stored; the gateway stops,
# one of them is made to look idle for two hours (retention is 1h, the
# shortest), and the restarted gateway's first sweep erases it — gone from
# the API, a tombstone of reason retention in the audit log, counted in
# turngate_sessions_pruned_total — while the other is kept.
cd "$(dirname "$0")"
source ../lib.sh
echo "building the age helper…"
go build -o data/age ./age
start_gateway
KEY=alice-5c2e8f1a7b3d9e6c0a4f2b8d1e7c3a95

# status PATH prints the HTTP status of GET PATH.
status() {
	curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" "$BASE$1"
}

IDLE=idle-$RUN
FRESH=fresh-$RUN
chat idle support "$IDLE" "my order is late"
chat fresh support "$FRESH" "and my invoice"
KEY=ops-9d4b1f7e2a6c8e0b3f5a7d9c1e2b4f60 get before "/v1/agents/support/sessions" >/dev/null # an admin's
expect "both sessions are stored" data/before.json "\"id\":\"$FRESH\".*\"id\":\"$IDLE\"|\"id\":\"$IDLE\".*\"id\":\"$FRESH\""

echo "== two hours pass for $IDLE (the gateway is stopped meanwhile) =="
stop_gateway
data/age -db data/turngate.db -tenant acme -session "$IDLE" -by 2h
start_gateway

echo "== the restarted gateway's first sweep =="
for _ in $(seq 1 600); do # up to a minute on a busy machine
	[[ $(status "/v1/agents/support/sessions/$IDLE/messages") == 404 ]] && break
	sleep 0.1
done
echo "GET $IDLE/messages: $(status "/v1/agents/support/sessions/$IDLE/messages")" | tee data/idle.status
echo "GET $FRESH/messages: $(status "/v1/agents/support/sessions/$FRESH/messages")" | tee data/fresh.status
expect "the idle session is erased" data/idle.status ': 404$'
expect "the other is kept" data/fresh.status ': 200$'
for _ in $(seq 1 100); do # the tombstone follows the erasure's commit
	grep -q '"kind":"erasure".*"sessionId":"'"$IDLE"'"' data/audit.log && break
	sleep 0.1
done
expect "the audit log has its tombstone, reason retention" data/audit.log '"kind":"erasure".*"reason":"retention".*"sessionId":"'"$IDLE"'"'
for _ in $(seq 1 100); do # counted right after the tombstone
	curl -s "$BASE/metrics" | grep '^turngate_sessions_pruned_total' >data/metrics.txt && break
	sleep 0.1
done
cat data/metrics.txt
expect "the sweep is counted" data/metrics.txt '^turngate_sessions_pruned_total\{agent="support"\} [1-9]'
finish
