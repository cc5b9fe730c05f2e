#!/usr/bin/env bash
# Shows the system prompt built from context blocks, a memory the model
# writes (and a write a rule blocks), and compaction of a long conversation.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway
S="guest-$RUN"

chat remember concierge "$S" "remember: allergic to nuts"
expect "the model stored its memory with update_context" data/remember.sse '"output":\{"block":"memory","stored":true'

chat secret concierge "$S" "remember: my password is hunter2"
expect "a memory write holding a password is blocked by the rule" data/secret.sse 'the memory must not hold passwords or card numbers'

chat breakfast concierge "$S" "When is breakfast served, and is there a spa in the hotel?"
audit breakfast "$S" 3
expect "the rule read the memory block: the prompt warns of the allergy" data/breakfast.audit \
	'"rulesFired":\["session.yaml#nut-allergy-warning"\]'
expect "the memory the next turn shows is the allowed one" data/breakfast.audit '"context":\{[^}]*"memory":"allergic to nuts"'
expect_no "the blocked password never reached the memory" data/breakfast.audit '"memory":"[^"]*hunter2'

chat pool concierge "$S" "Until when is the pool open in the evening, and can I bring my own towels?"
chat spa concierge "$S" "What does a massage at the spa cost, and must I book it in advance?"
audit spa "$S" 5
expect "the conversation passed compaction.after: a summary was written and stored" data/audit.log '"kind":"compaction".*"reason":"threshold"'
expect "rules see the compacted conversation" data/spa.audit '"rulesFired":\[[^]]*"session.yaml#fewer-steps-once-compacted"'

echo "── the stored transcript is whole: GET /v1/agents/concierge/sessions/$S/messages ──"
get history "/v1/agents/concierge/sessions/$S/messages" >/dev/null
expect "the history still starts with the first message" data/history.json '"text":"remember: allergic to nuts"'
finish
