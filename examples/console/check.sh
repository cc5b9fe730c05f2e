#!/usr/bin/env bash
# Shows the security console: a key is exchanged for a session cookie at
# /console, and the decisions of a few turns are found through
# /v1/admin/decisions, with the cookie (as the console's pages do) and with
# the key (as a script does). Open $BASE/console/ in a browser to click
# through the same.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway
ADMIN=acme-admin-5d0c2f8e7b1a4c69a3e2d7f0b9c8e1a4
ALICE=acme-alice-2e7d9c1b5a3f4e60b8d2c7a1f9e3b5d4
GLOBEX=globex-admin-7a1e3c5b9d2f4a68c0e4b2d6f8a1c3e5

KEY=$ALICE chat blocked files "etc-$RUN" "delete /etc/passwd"
expect "the delete under /etc is blocked" data/blocked.sse '"output":"no deletes under /etc"'
KEY=$ALICE chat held files "prod-$RUN" "delete /prod/db"
expect "the delete under /prod waits for an ops approver" data/held.sse '"type":"tool-approval-request"'

curl -sS "$BASE/console/" >data/console.html
expect "the console page is served from the binary" data/console.html '<script type="module" src="/console/static/main.js"></script>'
curl -sS -D data/signin.headers -c data/cookies.txt -H 'Content-Type: application/json' \
	-d "{\"key\":\"$ADMIN\"}" "$BASE/console/api/session" >data/signin.json
expect "sign-in sets an HttpOnly SameSite=Strict session cookie" data/signin.headers '^Set-Cookie: turngate_console=.*; HttpOnly; SameSite=Strict'
expect "and answers the principal and a CSRF token, not the key" data/signin.json '"tenant":"acme","subject":"sam","roles":\["admin"\],"admin":true,"csrf":"'
expect_no "the key does not come back" data/signin.json "$ADMIN"

# The decision store is written in batches: wait for the blocked call.
for _ in $(seq 1 50); do
	curl -sS -b data/cookies.txt "$BASE/v1/admin/decisions?session=etc-$RUN&tool=delete&action=block&hook=beforeToolCall" >data/decisions.json
	grep -q '"id"' data/decisions.json && break
	sleep 0.2
done
cat data/decisions.json; echo
expect "the console's cookie finds the blocked call by tool and action" data/decisions.json '"hook":"beforeToolCall".*"tool":"delete","toolCallId":"[^"]*","outcome":"matched","action":"block","rulesFired":\["data.turngate.tool_call.block\[\\"no deletes under /etc\\"\]"\]'
KEY=$ADMIN get by-key "/v1/admin/decisions?session=etc-$RUN&tool=delete&action=block&hook=beforeToolCall" >/dev/null
expect_same "the key finds the same decision" data/decisions.json data/by-key.json
KEY=$GLOBEX get other "/v1/admin/decisions?session=etc-$RUN" >/dev/null
expect "another tenant's admin finds none of it" data/other.json '^\{"decisions":\[\]\}$'

curl -sS -o data/nocsrf.json -w '%{http_code}\n' -b data/cookies.txt -X DELETE "$BASE/console/api/session" >data/nocsrf.code
expect "sign-out without the CSRF token is refused" data/nocsrf.code '^403$'
CSRF=$(grep -o '"csrf":"[^"]*"' data/signin.json | cut -d'"' -f4)
curl -sS -o /dev/null -w '%{http_code}\n' -b data/cookies.txt -H "X-Turngate-CSRF: $CSRF" -X DELETE "$BASE/console/api/session" >data/signout.code
expect "sign-out with it ends the session" data/signout.code '^204$'
curl -sS -o /dev/null -w '%{http_code}\n' -b data/cookies.txt "$BASE/v1/admin/decisions" >data/after.code
expect "and the cookie no longer opens the admin API" data/after.code '^401$'
finish
