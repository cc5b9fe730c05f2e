#!/usr/bin/env bash
# Shows the model unable to call delete, which the rule does not offer,
# while getWeather still works.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat del assistant "del-$RUN" "delete notes.txt"
expect_no "no delete call is made" data/del.sse '"toolName":"delete"'
expect "the model says delete is not offered" data/del.txt 'I would call the "delete" tool, but it is not offered'
audit del "del-$RUN"
expect "the audit log shows the activeTools override" data/del.audit \
	'"decision":\{"activeTools":\["read","write","getWeather"\]\}.*"hook":"beforeTurn"'

chat weather assistant "wx-$RUN" "What is the weather in Paris?"
expect "getWeather, which is offered, runs" data/weather.sse '"type":"tool-output-available".*"city":"Paris"'
finish
