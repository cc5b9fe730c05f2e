#!/usr/bin/env bash
# Shows the selected file added to the system prompt of the turn that sent it.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat editing coder "sel-$RUN" "Why does this panic?" '"selectedFile":"src/main.go"'
audit editing "sel-$RUN"
expect "the turn's system prompt names the selected file" data/editing.audit \
	'"decision":\{"system":"You are a coding assistant.\\n\\nUser is editing: src/main.go"\}.*"hook":"beforeTurn"'

chat plain coder "plain-$RUN" "Why does this panic?"
audit plain "plain-$RUN"
expect "without a selected file the rule does not fire" data/plain.audit '"hook":"beforeTurn".*"outcome":"no_match"'

# The same decision as a dry run, without a model call:
echo "── dry run: POST /v1/admin/rules/eval ──"
post eval /v1/admin/rules/eval '{"hook":"beforeTurn","input":{"turn":{"system":"You are a coding assistant.","body":{"selectedFile":"README.md"}}}}'
sed 's/^/  /' data/eval.out; echo
expect "the dry run shows the new system prompt" data/eval.out '"system":"You are a coding assistant.\\n\\nUser is editing: README.md"'
finish
