#!/usr/bin/env bash
# Shows the loop ending right after finalAnswer: no extra summary step.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat answer researcher "final-$RUN" "question: what is turngate?"
expect "finalAnswer ran" data/answer.sse '"type":"tool-output-available".*"output":\{"answer":"turngate is a policy-driven LLM agent gateway."\}'
expect "the engine ended the turn on the stop condition" data/answer.txt '^Stopped after 2 steps \(stopWhen hasToolCall "finalAnswer"\)\.$'
expect_no "the model took no extra summary step" data/answer.txt 'EXTRA STEP'
audit answer "final-$RUN"
expect "the audit log shows the stop condition" data/answer.audit '"decision":\{"stopWhen":\[\{"toolName":"finalAnswer","type":"hasToolCall"\}\]\}.*"hook":"beforeTurn"'
finish
