#!/usr/bin/env bash
# Shows a ticket filed with the customer's e-mail address masked.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat ticket support "pii-$RUN" "ticket: The app crashes on start, reach me at jane.doe@example.com"
expect "the model put the address in the ticket" data/ticket.sse '"type":"tool-input-available".*jane\.doe@example\.com'
expect "the tracker received it masked" data/ticket.sse '"type":"tool-output-available".*"body":"The app crashes on start, reach me at \[email redacted\]"'
expect_no "the address never reached the tracker" <(grep '"type":"tool-output-available"' data/ticket.sse) 'jane\.doe'
audit ticket "pii-$RUN"
expect "the audit log records the rewrite" data/ticket.audit '"decision":\{"action":"allow","input":\{"body":"The app crashes on start, reach me at \[email redacted\]".*"hook":"beforeToolCall"'
finish
