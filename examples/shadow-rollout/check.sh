#!/usr/bin/env bash
# Shows a shadow rule's would-be blocks in the audit log, a replay of the
# tightened candidate (rules.next/) that fails CI on allow-to-block, and
# the promotion of the candidate on the running gateway.
cd "$(dirname "$0")"
source ../lib.sh
# Step 3 promotes the candidate into rules/; the live files are put back
# when the script exits, so it can run again.
for f in rules/*.rego; do cp "$f" "data/$(basename "$f").live"; done
restore() {
	for f in data/*.rego.live; do cp "$f" "rules/$(basename "$f" .live)"; done
}
trap 'cleanup; restore' EXIT
start_gateway
TG=${TURNGATE:-$PWD/data/turngate}

echo "── 1. live traffic, the /etc rule in shadow ──"
S=etc-$RUN
chat etc files "$S" "delete /etc/hosts"
expect "the shadow rule does not block: the delete runs" data/etc.sse '"output":\{"deleted":"/etc/hosts"\}'
audit etc "$S"
expect "the record carries the shadow rule's would-be block" data/etc.audit '"shadow":\{.*"changed":true.*"rulesFired":\["files.rego#no deletes under /etc"\]'
expect "the record carries the input the rules saw, for replay" data/etc.audit '"hook":"beforeToolCall".*"input":\{.*"path":"/etc/hosts"'

chat notes files "notes-$RUN" "delete notes.txt"
expect "an ordinary delete runs" data/notes.sse '"output":\{"deleted":"notes.txt"\}'
chat ro files "ro-$RUN" "delete notes.txt" '"mode":"read-only"'
expect "read-only mode still blocks" data/ro.sse '"output":"delete is disabled in read-only mode"'
audit ro "ro-$RUN"

echo "── 2. replay the recorded traffic against the candidate ──"
# data/audit.log keeps every run's records (it is append-only); this run
# replays its own, so a second run counts what the first one did.
grep -E "\"sessionId\":\"[a-z0-9]+-$RUN\"" data/audit.log >data/run-audit.log
set +e
"$TG" replay --audit data/run-audit.log --rules rules.next --fail-on allow-to-block | tee data/replay.txt
code=${PIPESTATUS[0]}
set -e
echo "  exit status $code"
expect "replay reports the /etc delete as allow-to-block" data/replay.txt '^allow-to-block: 1$'
expect "with its session and the rule responsible" data/replay.txt "session $S .*delete"
expect "the rule responsible is named" data/replay.txt 'rules: data.turngate.tool_call.block\["deleting /etc/hosts is not allowed"\]'
expect_no "no other delete changes" data/replay.txt '^(block-to-allow|reason-changed)'
if ((code == 1)); then echo "  ✓ --fail-on allow-to-block exits 1"; else echo "  ✗ --fail-on allow-to-block exited $code"; FAILED=1; fi

echo "── 3. promote the candidate ──"
cp rules.next/*.rego rules/
post reload /v1/admin/rules/reload '{}'
get rules /v1/admin/rules >/dev/null
want=$("$TG" check rules.next | sed 's/.*revision //')
expect "the gateway serves the candidate's revision" data/rules.json "\"revision\":\"$want\""
chat promoted files "etc2-$RUN" "delete /etc/passwd"
expect "the /etc delete is blocked now" data/promoted.sse '"output":"deleting /etc/passwd is not allowed"'
finish
