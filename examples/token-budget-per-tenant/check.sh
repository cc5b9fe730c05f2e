#!/usr/bin/env bash
# Shows a tenant's daily output token budget: a research turn that runs it
# out stops at its next step, the tenant's next turn is refused with 429
# before the model is called, another tenant's turns run.
cd "$(dirname "$0")"
source ../lib.sh
# The budget is per day: a fresh store, so a second run today starts from
# a full budget too.
rm -f data/turngate.db data/turngate.db-wal data/turngate.db-shm
start_gateway

# post_with_headers NAME PATH JSON is post that also saves the response's
# status line and headers as data/NAME.headers.
post_with_headers() {
	local name=$1 path=$2 body=$3
	curl -sS -D "data/$name.headers" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$body" "$BASE$path" >"data/$name.out"
	echo "── $name: $(head -n 1 "data/$name.headers" | tr -d '\r')"
	sed 's/^/  /' "data/$name.out"; echo
}

KEY=acme-demo-3c9d1e7f5a2b48c6d0e4f1a7b3c5d9e2 post_with_headers hello "/v1/agents/researcher/sessions/acme-1-$RUN/messages" '{"text":"hello"}'
expect "acme's first turn runs (9 output tokens)" data/hello.out '"status":"completed".*"outputTokens":9'

KEY=acme-demo-3c9d1e7f5a2b48c6d0e4f1a7b3c5d9e2 post_with_headers research "/v1/agents/researcher/sessions/acme-2-$RUN/messages" '{"text":"research solar panels"}'
expect "the research turn runs two searches" data/research.out '"query":"details"'
expect "and stops at the next step: the budget ran out (the client sees why)" data/research.out 'Stopped after 2 steps \(quota tenant-output-tokens used up: 40 outputTokens per day\)\.'
expect_no "the model never wrote its answer" data/research.out 'Here is what I found'

KEY=acme-demo-3c9d1e7f5a2b48c6d0e4f1a7b3c5d9e2 post_with_headers refused "/v1/agents/researcher/sessions/acme-3-$RUN/messages" '{"text":"hello"}'
expect "acme's next turn is refused before the model is called" data/refused.headers '^HTTP/1.1 429'
expect "with quota_exceeded, naming the budget" data/refused.out '"code":"quota_exceeded","message":"quota tenant-output-tokens is used up: 40 outputTokens per day per tenant; retry in '
expect "Retry-After: until midnight UTC" data/refused.headers '^Retry-After: [0-9]+'
expect "and OpenAI's x-ratelimit headers" data/refused.headers '^X-Ratelimit-Limit-Tokens: 40'
KEY=acme-demo-3c9d1e7f5a2b48c6d0e4f1a7b3c5d9e2 post_with_headers openai /v1/chat/completions '{"model":"researcher","messages":[{"role":"user","content":"hello"}]}'
expect "on /v1/chat/completions: OpenAI's rate_limit_error, retryable" data/openai.out '"type":"rate_limit_error"'
expect "x-should-retry: true" data/openai.headers '^X-Should-Retry: true'
KEY=acme-demo-3c9d1e7f5a2b48c6d0e4f1a7b3c5d9e2 get history "/v1/agents/researcher/sessions/acme-3-$RUN/messages" >/dev/null
expect "nothing of the refused turn was stored" data/history.json '"code":"not_found"'

KEY=globex-demo-4d0e2f8a6b3c49d7e1f5a2b8c4d6e0f3 post_with_headers globex "/v1/agents/researcher/sessions/globex-1-$RUN/messages" '{"text":"hello"}'
expect "globex has a budget of its own: its turn runs" data/globex.out '"status":"completed".*Ask me to research something'


expect "the audit log records the stop and the refusal as decisions" data/audit.log '"hook":"beforeStep".*"rulesFired":\["quota/tenant-output-tokens"\]'
expect "…the refusal" data/audit.log '"hook":"beforeTurn".*"rulesFired":\["quota/tenant-output-tokens"\]'
curl -sS "$BASE/metrics" >data/metrics.txt
expect "the metrics count them per quota" data/metrics.txt '^turngate_quota_exceeded_total\{at="turn",per="tenant",quota="tenant-output-tokens"\} 2$'
expect "…and the stop" data/metrics.txt '^turngate_quota_exceeded_total\{at="step",per="tenant",quota="tenant-output-tokens"\} 1$'
finish
