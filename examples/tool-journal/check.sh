#!/usr/bin/env bash
# Kills the gateway with SIGKILL in the middle of a durable submission's
# turn, after its charge went through and while it waits on shipping, and
# shows that the restarted gateway finishes the submission without charging
# again, retrying the shipping call under the same Idempotency-Key.
cd "$(dirname "$0")"
source ../lib.sh

BACKEND_PORT=$((PORT + 1))
echo "building the stand-in shop…"
go build -o data/backend ./backend
background data/backend -listen "127.0.0.1:$BACKEND_PORT"
export SHOP_URL=http://127.0.0.1:$BACKEND_PORT
start_gateway

SESSION=order-$RUN
post submit "/v1/agents/shop/sessions/$SESSION/messages" '{"text":"buy a lamp","async":true}'
SUB=$(grep -o '"submissionId":"[^"]*"' data/submit.out | sed 's/.*:"\(.*\)"/\1/')
echo "submission $SUB accepted"
for _ in $(seq 1 300); do
	curl -s "$SHOP_URL/calls" | grep -q '"/ship"' && break
	sleep 0.1
done
echo "the card is charged and the turn waits on shipping: kill -9 the gateway"
kill -9 "$GATEWAY_PID"
wait "$GATEWAY_PID" 2>/dev/null || true
GATEWAY_PID=
curl -s -X POST "$SHOP_URL/release" >/dev/null # shipping answers from now on
start_gateway

for _ in $(seq 1 300); do
	get submission "/v1/agents/shop/sessions/$SESSION/submissions/$SUB" >/dev/null
	grep -q '"status":"completed"' data/submission.json && break
	sleep 0.1
done
curl -s "$SHOP_URL/calls" >data/calls.jsonl
echo "── the shop's requests ──"
sed 's/^/  /' data/calls.jsonl
get history "/v1/agents/shop/sessions/$SESSION/messages" >/dev/null

expect "the submission completes after the restart" data/submission.json '"status":"completed"'
if [[ $(grep -c '"/charge"' data/calls.jsonl) == 1 ]]; then
	echo "  ✓ the card was charged once: the re-run reused the journaled charge"
else
	echo "  ✗ the charge tool ran $(grep -c '"/charge"' data/calls.jsonl) times"
	FAILED=1
fi
SHIP_KEYS=$(grep '"/ship"' data/calls.jsonl | grep -o '"idempotencyKey":"[^"]*"' | sort -u)
if [[ $(grep -c '"/ship"' data/calls.jsonl) == 2 && $(wc -l <<<"$SHIP_KEYS") == 1 && $SHIP_KEYS != '"idempotencyKey":""' ]]; then
	echo "  ✓ the interrupted shipping call was retried once, under the same Idempotency-Key"
else
	echo "  ✗ shipping calls: $(grep -c '"/ship"' data/calls.jsonl), keys: $SHIP_KEYS"
	FAILED=1
fi
expect "the answer names the first charge" data/history.json 'Charged: \{\\"charge\\":1,\\"replayed\\":false\}'
expect "and the shipment" data/history.json 'Done: \{\\"shipment\\":\\"on its way\\"\}'
finish
