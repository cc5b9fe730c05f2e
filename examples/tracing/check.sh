#!/usr/bin/env bash
# Shows a turn exported as a span tree in the caller's trace.
cd "$(dirname "$0")"
source ../lib.sh

COLLECTOR_PORT=$((PORT + 1))
echo "building the stand-in collector…"
go build -o data/collector ./collector
rm -f data/spans.jsonl
background data/collector -listen "127.0.0.1:$COLLECTOR_PORT" -out data/spans.jsonl
export OTLP_ENDPOINT=http://127.0.0.1:$COLLECTOR_PORT
export OTEL_BSP_SCHEDULE_DELAY=200 # export every 200 ms instead of 5 s
start_gateway

# traced_chat NAME TRACE_ID CITY asks about CITY's weather with a
# traceparent naming TRACE_ID (and parent span 00f067aa0ba902b7).
traced_chat() {
	curl -sS -N -H 'Content-Type: application/json' -H "traceparent: 00-$2-00f067aa0ba902b7-01" \
		-d "{\"id\":\"$1-$RUN\",\"messages\":[{\"id\":\"u1\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"What is the weather in $3?\"}]}]}" \
		"$BASE/v1/agents/assistant/chat" >"data/$1.sse"
}
TRACE=4bf92f3577b34da6a3ce929d0e0e4736
BLOCKED=0af7651916cd43dd8448eb211c80319c
traced_chat paris $TRACE Paris
expect "the turn answered" data/paris.sse '"type":"tool-output-available"'
traced_chat atlantis $BLOCKED Atlantis
expect "the Atlantis call was blocked" data/atlantis.sse 'Atlantis is not a real city'
stop_gateway # exports the spans still buffered
for _ in $(seq 1 50); do
	(($(grep -c '"name":"invoke_agent assistant"' data/spans.jsonl 2>/dev/null) >= 2)) && break
	sleep 0.1
done
grep -F "\"traceId\":\"$TRACE\"" data/spans.jsonl >data/paris.spans || true
echo "── paris: spans ──"
sed 's/^/  /' data/paris.spans
expect "the turn span continues the caller's trace" data/paris.spans '"name":"invoke_agent assistant","traceId":"'$TRACE'","spanId":"[0-9a-f]{16}","parentSpanId":"00f067aa0ba902b7"'
expect "two step spans" <(grep -c '"name":"turngate.step"' data/paris.spans) '^2$'
expect "model calls with the GenAI attributes" data/paris.spans '"name":"chat demo".*"gen_ai.operation.name":"chat"'
expect "and their provider" data/paris.spans '"gen_ai.provider.name":"turngate.scripted"'
expect "a tool call span" data/paris.spans '"name":"execute_tool weather".*"gen_ai.tool.name":"weather"'
expect "with the policy decision as an event" data/paris.spans '"name":"turngate.policy.decision","attributes":\{[^}]*"turngate.policy.hook":"beforeToolCall"'
expect_no "no message content on any span" data/spans.jsonl 'weather in|sunny'
grep -F "\"traceId\":\"$BLOCKED\"" data/spans.jsonl >data/atlantis.spans || true
expect "the blocked call's span says so" data/atlantis.spans '"name":"execute_tool weather".*"turngate.tool.decision":"block"'
expect "and names the rule that fired" data/atlantis.spans '"turngate.policy.outcome":"matched","turngate.policy.revision":"sha256:[0-9a-f]+","turngate.policy.rules_fired":\["data.turngate.tool_call.block'
finish
