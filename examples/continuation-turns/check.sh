#!/usr/bin/env bash
# Shows a user turn on the big model with reasoning, then the continuation
# after the client tool's result on the fast model without reasoning.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

S=cont-$RUN
chat first concierge "$S" "Book a table for 4"
expect "the user turn runs on the big model" data/first.txt '^\[big model\]'
expect "the user turn streams its reasoning" data/first.sse '"type":"reasoning-start"'
expect "the model asks the client to run confirm" data/first.sse '"type":"tool-input-available".*"toolName":"confirm"'

# The client runs confirm (asks the user) and sends the assistant message
# back with the tool's output, as useChat does: a continuation turn.
MSG=$(field first messageId)
CALL=$(field first toolCallId)
send_chat second concierge "{\"id\":\"$S\",\"trigger\":\"submit-message\",\"messages\":[
  {\"id\":\"first-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"Book a table for 4\"}]},
  {\"id\":\"$MSG\",\"role\":\"assistant\",\"parts\":[{\"type\":\"tool-confirm\",\"toolCallId\":\"$CALL\",\"state\":\"output-available\",\"input\":{\"question\":\"Book a table for 4 tonight?\"},\"output\":\"yes\"}]}]}"
expect "the continuation runs on the fast model" data/second.txt '^\[fast model\] The user answered "yes"'
expect_no "the continuation streams no reasoning" data/second.sse '"type":"reasoning-'

audit turns "$S" 2
expect "the audit log shows both rules firing on the continuation" data/turns.audit \
	'"decision":\{"model":"fast","sendReasoning":false\}.*"hook":"beforeTurn".*"rulesFired":\["continuation.yaml#cheap-model-on-continuation","continuation.yaml#hide-reasoning-on-continuation"\]'
finish
