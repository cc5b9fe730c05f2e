#!/usr/bin/env bash
# Shows a transfer blocked without verification, run after a successful
# verification of the same payee, and blocked for a payee other than the
# one verified.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

chat unverified treasurer "unverified-$RUN" "pay Acme"
expect "a transfer with no verification is blocked" data/unverified.sse '"type":"tool-output-available".*"output":"verify the payee first'

chat verified treasurer "verified-$RUN" "verify Acme and pay"
expect "the payee is verified" data/verified.sse '"type":"tool-output-available".*"output":\{"payee":"Acme"\}'
expect "then the transfer to it runs" data/verified.sse '"type":"tool-output-available".*"output":\{"amount":100,"payee":"Acme"\}'

chat switched treasurer "switched-$RUN" "verify Globex and pay"
expect "Globex is verified" data/switched.sse '"type":"tool-output-available".*"output":\{"payee":"Globex"\}'
expect "a transfer to another payee is still blocked" data/switched.sse '"type":"tool-output-available".*"output":"verify the payee first'
audit verified "verified-$RUN"
expect "the audit record holds what the rule read" data/verified.audit '"toolName":"wire_transfer".*"state":\{"payee_verified":\{"at":"[^"]+","happened":true\}\}|"state":\{"payee_verified":\{"at":"[^"]+","happened":true\}\}.*"toolName":"wire_transfer"'
finish
