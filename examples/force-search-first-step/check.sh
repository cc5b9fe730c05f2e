#!/usr/bin/env bash
# Shows step 0 forced to search although the model would answer from memory.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat news assistant "news-$RUN" "What's new in Go?"
expect "step 0 calls search" data/news.sse '"type":"tool-input-available".*"toolName":"search"'
expect "the turn does not end on the memory answer: step 1 answers from the results" data/news.txt '^Based on the search results:'
audit news "news-$RUN"
expect "the audit log shows the step-0 override" data/news.audit \
	'"decision":\{"activeTools":\["search"\],"toolChoice":\{"toolName":"search","type":"tool"\}\}.*"hook":"beforeStep".*"stepNumber":0'
expect "and step 1 left alone" data/news.audit '"hook":"beforeStep".*"outcome":"no_match".*"stepNumber":1'
finish
