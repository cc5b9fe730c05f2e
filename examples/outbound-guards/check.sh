#!/usr/bin/env bash
# Shows what the gateway sends out on a turn's behalf: a tool's secret key
# does not follow a redirect to another origin, a backend's internals reach
# neither the client nor the model (the audit log keeps them), and a linked
# file on a NAT64 form of the cloud metadata address is never fetched.
cd "$(dirname "$0")"
source ../lib.sh

BACKEND_PORT=$((PORT + 1))
OTHER_PORT=$((PORT + 2))
echo "building the stand-in partner…"
go build -o data/backend ./backend
background data/backend -listen "127.0.0.1:$BACKEND_PORT" -other "127.0.0.1:$OTHER_PORT"
export PARTNER_URL=http://127.0.0.1:$BACKEND_PORT PARTNER_KEY=partner-key-$RUN
start_gateway

chat lookup desk "lookup-$RUN" "look up order A-1001"
expect "the partner's redirect to another origin is not followed: a tool error" data/lookup.sse '"type":"tool-output-error"'
expect "the client and the model are told only that the tool failed" data/lookup.txt 'The partner said: Tool "lookup" failed\.'
curl -s "http://127.0.0.1:$OTHER_PORT/calls" >data/collected.jsonl
expect_no "the other origin got neither the key nor the order" data/collected.jsonl "partner-key|A-1001|collect"
audit lookup "lookup-$RUN"
expect "the audit log says why" data/lookup.audit '"error":"http tool lookup: Post request failed: redirect to another origin not followed'

chat smuggle desk "smuggle-$RUN" "look up order https://evil.example/?q=the-whole-conversation"
expect "an order id that is a URL is blocked by the rule before anything goes out" data/smuggle.txt 'The partner said: an order id is letters, digits and dashes'

chat stock desk "stock-$RUN" "check stock of lamp"
expect "a failing backend is a tool error" data/stock.txt 'The partner said: Tool "stock" failed\.'
expect_no "whose internals reach neither the client nor the model" data/stock.sse '10\.0\.3\.7|pq:|inventory'
audit stock "stock-$RUN"
expect "the audit log keeps them" data/stock.audit '"error":"http tool stock: status 500: pq: password authentication failed'

post metadata "/v1/agents/desk/sessions/fetch-$RUN/messages" \
	'{"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"look at this"},{"type":"file","mediaType":"image/png","url":"https://[64:ff9b::a9fe:a9fe]/latest/meta-data.png"}]}]}'
cat data/metadata.out
echo
expect "a file on NAT64's form of 169.254.169.254 is not fetched" data/metadata.out '"code":"invalid_attachment".*resolves to an address that is not public'
finish
