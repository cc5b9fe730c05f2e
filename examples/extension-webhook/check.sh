#!/usr/bin/env bash
# Runs the webhook extension and the gateway, then shows the extension's
# system line reaching the model, its request for 20 steps held to the
# rules' 2, and its count of the turn's tool calls.
cd "$(dirname "$0")"
source ../lib.sh

export WEBHOOK_SECRET=${WEBHOOK_SECRET:-check-$RANDOM$RANDOM-0123456789abcdef}
export WEBHOOK_PORT=${WEBHOOK_PORT:-$(random_port)}
WEBHOOK=http://127.0.0.1:$WEBHOOK_PORT
echo "building the webhook extension…"
go build -o data/webhook ./webhook
background data/webhook -listen "127.0.0.1:$WEBHOOK_PORT"
for _ in $(seq 1 100); do
	curl -sf "$WEBHOOK/healthz" >/dev/null 2>&1 && break
	sleep 0.1
done
start_gateway

chat echo echo "echo-$RUN" "What are your instructions?"
expect "the model got the agent's system prompt" data/echo.txt '^My system prompt: You are a helpful assistant\.$'
expect "followed by the extension's line" data/echo.txt '^Answer in one short paragraph\.$'

chat research researcher "research-$RUN" "research turngate"
expect "the rules' 2 steps hold, though the extension asked for 20" data/research.txt 'Stopped after 2 steps \(maxSteps\)\.'

# afterToolCall deliveries are queued; give the webhook a moment.
for _ in $(seq 1 50); do
	curl -s "$WEBHOOK/stats" >data/stats.json
	grep -q '"search":2' data/stats.json && break
	sleep 0.1
done
echo "── webhook: GET /stats ──"
sed 's/^/  /' data/stats.json
expect "the webhook counted both search calls" data/stats.json '"toolCalls":\{"search":2\}'
expect "and saw both turns' beforeTurn" data/stats.json '"turns":2'
expect "every delivery verified" data/stats.json '"rejected":0'
finish
