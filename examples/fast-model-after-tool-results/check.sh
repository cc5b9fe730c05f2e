#!/usr/bin/env bash
# Shows step 0 on the big model and the summary step on the fast one.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat wx assistant "wx-$RUN" "What is the weather in Paris?"
expect "step 0 runs on the big model and calls weather" data/wx.txt '^\[big model\] Let me check the weather in Paris\.$'
expect "the summary step runs on the fast model" data/wx.txt '^\[fast-summary model\] Summary: \{"city":"Paris"'
expect_no "the big model does not summarise" data/wx.txt '^\[big model\] Summary'
audit wx "wx-$RUN"
expect "the audit log shows the switch at step 1" data/wx.audit \
	'"decision":\{"model":"fast-summary"\}.*"hook":"beforeStep".*"stepNumber":1'
finish
