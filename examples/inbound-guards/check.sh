#!/usr/bin/env bash
# Shows what the gateway refuses at its door: /metrics only on its own port
# and only to the scraper's key, /readyz naming the replica only to a key,
# a body that is not declared JSON, an ops approver approving its own
# production delete, and an address that keeps guessing keys.
cd "$(dirname "$0")"
source ../lib.sh
METRICS_PORT=$((PORT + 1))
METRICS_KEY=$(printf '%s' "metrics-$RUN" | sha256sum | cut -c1-40)
export METRICS_PORT METRICS_KEY
start_gateway
OLGA=olga-ops-7e1c4a9d2b6f0e3a8c5d1b7f4e2a9c60
OSCAR=oscar-ops-3b8d0f6a2c9e4d1b7a5f3c8e0d6b2a94

# status NAME CURL-ARGS... saves the response as data/NAME.json and its
# status code as data/NAME.status.
status() {
	local name=$1
	shift
	curl -sS -o "data/$name.json" -w '%{http_code}\n' "$@" >"data/$name.status"
	echo "$name: $(cat "data/$name.status") $(head -c 200 "data/$name.json")"
}

# decide NAME KEY APPROVAL APPROVED posts a decision as the principal of KEY.
decide() {
	status "$1" -X POST -H "Authorization: Bearer $2" -H 'Content-Type: application/json' \
		-d "{\"approved\":$4}" "$BASE/v1/approvals/$3"
}

echo "== /metrics and /readyz =="
status metrics-public "$BASE/metrics"
expect "the public listener does not serve /metrics" data/metrics-public.status '^404$'
status metrics-nokey "http://127.0.0.1:$METRICS_PORT/metrics"
expect "the metrics port wants the scraper's key" data/metrics-nokey.status '^401$'
status metrics-apikey -H "Authorization: Bearer $OLGA" "http://127.0.0.1:$METRICS_PORT/metrics"
expect "an API key is not the scraper's key" data/metrics-apikey.status '^401$'
status metrics "http://127.0.0.1:$METRICS_PORT/metrics" -H "Authorization: Bearer $METRICS_KEY"
expect "the scraper gets the metrics" data/metrics.json '^go_goroutines '
status ready-anonymous "$BASE/readyz"
expect "an anonymous probe learns only that the gateway is ready" data/ready-anonymous.json '^\{"checks":.*"ready":true\}$'
expect_no "not which replica answers nor its revision" data/ready-anonymous.json 'replica|revision'
status ready-ops -H "Authorization: Bearer $OLGA" "$BASE/readyz"
expect "an operator's key sees the replica and its revision" data/ready-ops.json '"replica":"inbound-1".*"revision":"sha256:'
curl -sS -D - -o /dev/null -H "Authorization: Bearer $OLGA" "$BASE/v1/approvals" | tr 'A-Z' 'a-z' >data/headers.txt
expect "every answer is uncacheable" data/headers.txt '^cache-control: no-store'
expect "and never sniffed" data/headers.txt '^x-content-type-options: nosniff'

echo "== a body that is not declared JSON =="
status form -X POST -H "Authorization: Bearer $OLGA" -H 'Content-Type: text/plain' \
	-d '{"id":"form","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"delete /prod/db"}]}]}' "$BASE/v1/agents/files/chat"
expect "a text/plain body (what a cross-site form sends) is 415" data/form.status '^415$'

echo "== nobody approves their own production delete =="
KEY=$OLGA chat ask files "prod-$RUN" "delete /prod/db"
expect "olga's delete waits for an ops approver" data/ask.sse '"type":"tool-approval-request".*"reason":"deletes a production file"'
KEY=$OLGA get olga-list /v1/approvals >/dev/null
expect_no "olga is not offered her own approval" data/olga-list.json "$(field ask approvalId)"
decide self "$OLGA" "$(field ask approvalId)" true
expect "olga approving it herself is 403" data/self.status '^403$'
expect "and says why" data/self.json 'asked for this approval itself'
decide other "$OSCAR" "$(field ask approvalId)" true
expect "oscar, another ops approver, may" data/other.json '"state":"approved".*"decidedBy":"oscar"'
KEY=$OLGA chat ask2 files "shared-$RUN" "delete /shared/notes"
decide own "$OLGA" "$(field ask2 approvalId)" true
expect "a rule naming \"requester\" lets olga decide her own shared delete" data/own.json '"state":"approved".*"decidedBy":"olga"'

echo "== an address that keeps guessing =="
for i in 1 2 3 4 5; do
	status guess-$i -H "Authorization: Bearer guess-$i-$RUN" "$BASE/v1/approvals"
done
expect "a wrong key is 401" data/guess-1.status '^401$'
status throttled -H "Authorization: Bearer $OLGA" "$BASE/v1/approvals"
expect "after 5 failures in a minute the address gets 429, right key or not" data/throttled.status '^429$'
expect "each failure is logged at info with its address" data/gateway.log 'authentication failed.*127\.0\.0\.1'
expect_no "never with the key it tried" data/gateway.log "guess-1-$RUN"
finish
