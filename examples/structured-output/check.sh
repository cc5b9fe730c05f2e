#!/usr/bin/env bash
# Shows a prose answer with a tool call, then the flagged turn answering
# JSON that matches the schema, with no tool call.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat prose triage "prose-$RUN" "assess: disk full on db-1"
expect "a normal turn searches the runbooks" data/prose.sse '"type":"tool-input-available".*"toolName":"search"'
expect "and answers in prose" data/prose.txt 'I would rate it high'

chat structured triage "json-$RUN" "assess: disk full on db-1" '"mode":"structured-answer"'
expect_no "the flagged turn calls no tool" data/structured.sse '"type":"tool-'
expect "and answers JSON matching the schema" data/structured.txt '^\{"severity":"high"\}$'

# saveMessages returns the parsed structured output as "output".
post api "/v1/agents/triage/sessions/api-$RUN/messages" '{"text":"assess: disk full on db-1","body":{"mode":"structured-answer"}}'
echo "── api: saveMessages answer ──"; sed 's/^/  /' data/api.out; echo
expect "saveMessages returns the structured output" data/api.out '"output":\{"severity":"high"\}'
audit api "api-$RUN"
expect "the audit log shows the output schema and no tools" data/api.audit '"decision":\{"activeTools":\[\],"output":\{"name":"result","schema":'
finish
