#!/usr/bin/env bash
# Shows a short chat researching for the agent's 6 steps and a chat of
# over 100 messages stopping after 3.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat short researcher "short-$RUN" "research turngate"
expect "a short chat runs the agent's 6 steps" data/short.txt '^Stopped after 6 steps \(maxSteps\)\.$'

# saveMessages with 100 earlier messages and the question: 101 messages.
msgs=""
for i in $(seq 1 100); do msgs+="{\"id\":\"m$i-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"note $i\"}]},"; done
msgs+="{\"id\":\"q-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"research turngate\"}]}"
post long "/v1/agents/researcher/sessions/long-$RUN/messages" "{\"messages\":[$msgs]}"
echo "── long: saveMessages answer ──"
grep -o '"text":"[^"]*"' data/long.out | sed 's/^/  /'
expect "a chat of 101 messages stops after 3 steps" data/long.out '"text":"Stopped after 3 steps \(maxSteps\)\."'
audit long "long-$RUN"
expect "the audit log shows maxSteps 3 from the rule" data/long.audit '"decision":\{"maxSteps":3\}.*"hook":"beforeTurn".*"rulesFired":\["step_budget.yaml#short-budget-for-long-chats"\]'
expect "and a turn of 3 steps" data/long.audit '"kind":"turn".*"steps":3,'
finish
