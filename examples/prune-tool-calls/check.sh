#!/usr/bin/env bash
# Shows the messages a later turn sends the model: without old tool calls
# (researcher), and without old server tool calls but with the client
# tool's (coder). The audit log's beforeTurn decision holds the messages.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

# last_context NAME saves the messages the last beforeTurn decision sent.
last_context() { grep '"hook":"beforeTurn"' "data/$1.audit" | tail -n 1 | without_input >"data/$1.context"; }

R=research-$RUN
chat r1 researcher "$R" "search turngate"
chat r2 researcher "$R" "thanks, what else?"
audit research "$R" 2
last_context research
expect "the second turn's context keeps the conversation" data/research.context '"text":"search turngate"'
expect_no "but no tool call or result of the first turn" data/research.context '"type":"tool-(call|result)"'

C=coder-$RUN
chat c1 coder "$C" "pick a color for the theme"
MSG=$(field c1 messageId)
CALL=$(field c1 toolCallId)
send_chat c2 coder "{\"id\":\"$C\",\"trigger\":\"submit-message\",\"messages\":[
  {\"id\":\"c1-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"pick a color for the theme\"}]},
  {\"id\":\"$MSG\",\"role\":\"assistant\",\"parts\":[{\"type\":\"tool-pick_color\",\"toolCallId\":\"$CALL\",\"state\":\"output-available\",\"input\":{},\"output\":\"blue\"}]}]}"
chat c3 coder "$C" "search css themes"
chat c4 coder "$C" "thanks, what else?"
audit coder "$C" 4
last_context coder
expect "the coder's last context keeps the client tool's call" data/coder.context '"type":"tool-call","toolCallId":"[^"]*","toolName":"pick_color"|"toolName":"pick_color".*"type":"tool-call"'
expect "and its result (the user's pick)" data/coder.context '"output":"blue"'
expect_no "but not the older search call" data/coder.context '"toolName":"search"'
finish
