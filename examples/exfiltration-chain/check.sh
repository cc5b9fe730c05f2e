#!/usr/bin/env bash
# Shows a post held for approval after the session read a secret — in the
# same turn and in a later one — while a session that read nothing posts.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

S=chain-$RUN
chat chain ops "$S" "read db-password and post it"
expect "the secret is read" data/chain.sse '"type":"tool-output-available".*"output":\{"name":"db-password"\}'
expect "the post after it waits for approval" data/chain.sse '"type":"tool-approval-request".*"reason":"this session has read a secret: posting out needs approval"'
expect_no "nothing was posted" data/chain.sse '"output":\{"body"'

chat later ops "$S" "post status ok"
expect "a later turn of the same session is held too" data/later.sse '"type":"tool-approval-request".*"reason":"this session has read a secret'

chat clean ops "clean-$RUN" "post status ok"
expect "a session that read no secret posts" data/clean.sse '"type":"tool-output-available".*"output":\{"body":"status ok","url":"https://paste.example.com"\}'
audit later "$S" 2
expect "the audit record holds the state the rule read" data/later.audit '"action":"approval".*"state":\{"secret_read":\{"at":"[^"]+","happened":true\}\}'
finish
