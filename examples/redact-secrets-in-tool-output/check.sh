#!/usr/bin/env bash
# Shows the accounts service's secrets redacted from what the model sees.
cd "$(dirname "$0")"
source ../lib.sh

BACKEND_PORT=$((PORT + 1))
echo "building the stand-in accounts service…"
go build -o data/backend ./backend
background data/backend -listen "127.0.0.1:$BACKEND_PORT" -file backend/account.json
export ACCOUNTS_URL=http://127.0.0.1:$BACKEND_PORT/
start_gateway

chat acct ops "acct-$RUN" "show account acme-prod"
OUT=data/acct.output
grep '"type":"tool-output-available"' data/acct.sse >"$OUT" || true
expect "the model sees the account" "$OUT" '"account":"acme-prod"'
expect "with the database password redacted" "$OUT" '"password":"\[REDACTED\]"'
expect "the API key redacted" "$OUT" '"api_key":"\[REDACTED\]"'
expect "and the token in the notes masked" "$OUT" '"notes":"Rotate the deploy token \[secret redacted\] before Friday."'
expect_no "no secret reaches the model or the client" data/acct.sse 'hunter2|sk_live_|ghp_'
expect_no "nor the stored history" <(get history "/v1/agents/ops/sessions/acct-$RUN/messages") 'hunter2|sk_live_|ghp_'
audit acct "acct-$RUN"
expect "the audit log names the rules that fired" data/acct.audit '"hook":"toolResult".*"outcome":"matched"'
expect_no "and keeps no secret either" data/audit.log 'hunter2|sk_live_|ghp_'
finish
