#!/usr/bin/env bash
# Shows JWT bearer authentication: a token of the identity provider (./idp,
# a tiny local one) is a principal; expired, wrong-audience, forged and
# other-tenant tokens are refused with their codes; the API key still works;
# no token reaches the gateway's log.
cd "$(dirname "$0")"
source ../lib.sh
IDP_PORT=${IDP_PORT:-$(random_port)}
export IDP_PORT
echo "building the identity provider…"
go build -o data/idp ./idp
rm -f data/*.jwt
background data/idp -listen "127.0.0.1:$IDP_PORT" -out data
for _ in $(seq 1 100); do [[ -s data/admin.jwt ]] && curl -sf "http://127.0.0.1:$IDP_PORT/jwks" >/dev/null && break; sleep 0.1; done
start_gateway

KEY=$(cat data/valid.jwt) chat valid assistant "jwt-$RUN" "weather in Lima"
expect "a valid token runs the turn" data/valid.sse '"type":"tool-output-available".*"output":\{"city":"Lima"'
KEY=ci-demo-6a1f0c9e3b7d48a2b5e4c1f09d8a7b36 chat apikey assistant "key-$RUN" "weather in Oslo"
expect "the API key still works" data/apikey.sse '"output":\{"city":"Oslo"'

for t in expired wrong-aud forged other-tenant; do
	KEY=$(cat data/$t.jwt) post "$t" "/v1/agents/assistant/sessions/jwt-$t-$RUN/messages" '{"text":"hello"}'
	cat "data/$t.out"; echo
done
expect "an expired token: 401 token_expired" data/expired.out '"code":"token_expired"'
expect "a token for another app: 401 token_audience" data/wrong-aud.out '"code":"token_audience"'
expect "a forged token (same kid, another key): 401 token_signature" data/forged.out '"code":"token_signature"'
expect "a tenant the gateway does not have: 403 token_tenant" data/other-tenant.out '"code":"token_tenant"'

curl -sS -H "Authorization: Bearer $(cat data/expired.jwt)" "$BASE/v1/models" >data/models.json
cat data/models.json; echo
expect "OpenAI's error shape on /v1/models" data/models.json '"type":"authentication_error".*"code":"token_expired"|"code":"token_expired".*"type":"authentication_error"'

KEY=$(cat data/valid.jwt) get admin-user /v1/admin/rules >/dev/null
expect "a user token is not an admin" data/admin-user.json '"code":"forbidden"'
KEY=$(cat data/admin.jwt) get admin /v1/admin/rules >/dev/null
expect "a token with the admin role is" data/admin.json '"revision"'

for t in data/*.jwt; do
	sig=$(cut -d. -f3 "$t")
	expect_no "the gateway's log does not hold $(basename "$t")" data/gateway.log "$sig"
done
finish
