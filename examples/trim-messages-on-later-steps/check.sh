#!/usr/bin/env bash
# Shows step 2 of a long session's turn sent only the last 8 messages.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

S=trim-$RUN
# Eight earlier messages (saveMessages), then a three-step research turn.
msgs=""
for i in 1 2 3 4 5 6 7; do msgs+="{\"id\":\"n$i-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"note $i\"}]},"; done
post notes "/v1/agents/researcher/sessions/$S/messages" "{\"messages\":[${msgs%,}]}"
chat research researcher "$S" "research turngate"
expect "the turn runs three steps" data/research.txt '^Done researching\.$'
audit research "$S" 2
grep '"hook":"beforeStep"' data/research.audit | without_input | grep '"stepNumber":2' >data/step2.audit || true
echo "  messages sent at step 2: $(grep -o '"role":' data/step2.audit | wc -l)"
expect "step 2 was trimmed by the rule" data/step2.audit '"rulesFired":\["trim.yaml#trim-messages-on-later-steps"\]'
[[ $(grep -o '"role":' data/step2.audit | wc -l) == 8 ]] && echo "  ✓ to the last 8 messages" || { echo "  ✗ want 8 messages"; FAILED=1; }
expect "starting at note 6" data/step2.audit '"decision":\{"messages":\[\{"content":\[\{"text":"note 6"'
finish
