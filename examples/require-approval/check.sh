#!/usr/bin/env bash
# Shows tool approval: the chat user approves one delete and denies another
# (answering as the AI SDK client does after addToolApprovalResponse), and
# an ops approver approves and denies production deletes through
# /v1/approvals while the chat user's own answer does not count.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway
KEY=alice-e1426c705006c54eb62f9deef6b0589d
OPS=olga-ops-2c6b5e607b556205fb44a6a71f157d46

# answer NAME SESSION ASKED APPROVED REASON resends the assistant message of
# the ASKED stream with its delete part in approval-responded, as the AI SDK
# client does (sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses).
answer() {
	local name=$1 session=$2 asked=$3 approved=$4 reason=$5
	local mid cid aid
	mid=$(field "$asked" messageId)
	cid=$(field "$asked" toolCallId)
	aid=$(field "$asked" approvalId)
	send_chat "$name" files "{\"id\":\"$session\",\"trigger\":\"submit-message\",\"messageId\":\"$mid\",\"messages\":[{\"id\":\"$asked-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"delete\"}]},{\"id\":\"$mid\",\"role\":\"assistant\",\"parts\":[{\"type\":\"tool-delete\",\"toolCallId\":\"$cid\",\"state\":\"approval-responded\",\"input\":{},\"approval\":{\"id\":\"$aid\",\"approved\":$approved,\"reason\":\"$reason\"}}]}]}"
}

# ops METHOD PATH [JSON] calls the approvals API as the ops approver.
ops() {
	curl -sS -X "$1" -H "Authorization: Bearer $OPS" -H 'Content-Type: application/json' ${3:+-d "$3"} "$BASE$2"
}

# wait_history NAME SESSION REGEX waits until the session's stored
# transcript matches REGEX (a turn resumed in the background), saving it as
# data/NAME.json.
wait_history() {
	for _ in $(seq 1 100); do
		get "$1" "/v1/agents/files/sessions/$2/messages" >/dev/null
		grep -Eq -- "$3" "data/$1.json" && return 0
		sleep 0.1
	done
}

echo "== the chat user approves =="
S=user-ok-$RUN
chat ask1 files "$S" "delete notes.txt"
expect "the call waits: tool-approval-request after tool-input-available" data/ask1.sse '"type":"tool-approval-request","approvalId":"appr_[^"]+","toolCallId":"[^"]+","reason":"deletes a file"'
expect "the turn ends with finishReason tool-calls" data/ask1.sse '"type":"finish","finishReason":"tool-calls"'
expect_no "the tool did not run" data/ask1.sse '"deleted"'
answer ok1 "$S" ask1 true "go ahead"
expect "approved: the tool runs before the next step" data/ok1.sse '"type":"tool-output-available".*"output":\{"deleted":"notes.txt"\}'
expect "the model relays the result" data/ok1.txt 'The delete tool said: \{"deleted":"notes.txt"\}'

echo "== the chat user denies =="
S=user-no-$RUN
chat ask2 files "$S" "delete photos.zip"
answer no2 "$S" ask2 false "keep it"
expect "denied: tool-output-denied" data/no2.sse '"type":"tool-output-denied"'
expect "the model sees the denial and the reason" data/no2.txt 'not approved, so it did not run. Reason: keep it'
answer replay2 "$S" ask2 true "again"
expect "a replayed answer runs nothing" data/replay2.sse '"type":"finish","finishReason":"interrupted"'

echo "== an ops approver approves =="
S=ops-ok-$RUN
chat ask3 files "$S" "delete /prod/old.log"
expect "the chat client is told the call waits" data/ask3.sse '"type":"tool-approval-request".*"reason":"deletes a production file"'
answer self3 "$S" ask3 true "I am sure"
expect "the chat user's own answer does not count" data/self3.sse '"type":"finish","finishReason":"interrupted"'
ops GET "/v1/approvals?state=pending&sessionId=$S" >data/list3.json
cat data/list3.json; echo
expect "ops lists it with the input that would run" data/list3.json '"toolName":"delete","input":\{"path":"/prod/old.log"\}.*"state":"pending"'
ops POST "/v1/approvals/$(field ask3 approvalId)" '{"approved":true,"reason":"ticket 7"}' >data/decide3.json
expect "ops approves" data/decide3.json '"state":"approved","requestedAt".*"decidedBy":"olga","reason":"ticket 7"'
ops POST "/v1/approvals/$(field ask3 approvalId)" '{"approved":false}' >data/again3.json
expect "a second decision is refused" data/again3.json '"code":"conflict"'
wait_history hist3 "$S" '"state":"output-available"'
expect "the turn resumed on its own and the tool ran" data/hist3.json '"state":"output-available".*"deleted":"/prod/old.log"'

echo "== an ops approver denies =="
S=ops-no-$RUN
chat ask4 files "$S" "delete /prod/db"
ops POST "/v1/approvals/$(field ask4 approvalId)" '{"approved":false,"reason":"not during business hours"}' >data/decide4.json
wait_history hist4 "$S" 'The delete tool said'
expect "the model saw the denial" data/hist4.json '"state":"output-denied".*not approved, so it did not run. Reason: not during business hours'

expect "the audit log records who decided" data/audit.log '"by":"olga".*"kind":"approval","outcome":"approved"'
finish
