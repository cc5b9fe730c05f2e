#!/usr/bin/env bash
# Shows card numbers masked in what the store keeps while the running
# turn's model and client see them as sent.
cd "$(dirname "$0")"
source ../lib.sh
rm -f data/audit.log # a rerun checks its own records only
TG=${TURNGATE:-}
start_gateway
TG=${TG:-$PWD/data/turngate}

"$TG" test rules >data/test.txt
expect "the rule's tests pass" data/test.txt 'PASS|ok'

chat pay payments "pay-$RUN" "charge 25 to 4111 1111 1111 1234"
expect "the running turn's model saw the number (it repeats it)" data/pay.txt 'Charging 25 to 4111 1111 1111 1234'
expect "the charge tool got it" data/pay.sse '"type":"tool-input-available".*"card":"4111 1111 1111 1234"'

get history "/v1/agents/payments/sessions/pay-$RUN/messages" >/dev/null
expect "the stored user message is masked" data/history.json '"text":"charge 25 to \[card ending 1234\]"'
expect "so are the stored tool input and output" data/history.json '"input":\{"amount":25,"card":"\[card ending 1234\]"\}'
expect_no "the store holds no card number" data/history.json '4111'

chat recall payments "pay-$RUN" "which card did I use?"
audit pay "pay-$RUN" 2
expect "each stored message has its beforePersist record" data/pay.audit '"hook":"beforePersist".*"outcome":"matched"'
expect "the turn record's tool call is masked as stored" data/pay.audit '"toolCalls":\[\{"decision":"allow","input":\{"amount":25,"card":"\[card ending 1234\]"\}'
expect "which says how many matches were masked" data/pay.audit '"masked":1'
expect_no "the audit log holds no card number either" data/audit.log '4111'
finish
