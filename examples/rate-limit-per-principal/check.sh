#!/usr/bin/env bash
# Shows alice's 4th email in the hour blocked while bob's first still runs,
# and the count the rule read recorded in the audit log.
cd "$(dirname "$0")"
source ../lib.sh
# The count lives in the store and survives restarts: start from an empty
# one so a second run sees the same counts.
rm -f data/turngate.db data/turngate.db-wal data/turngate.db-shm
start_gateway
ALICE=alice-demo-6c0b8a2e4f1d9357a1c2e3f405162738
BOB=bob-demo-0f9e8d7c6b5a49382716a5b4c3d2e1f0

for i in 1 2 3; do
	KEY=$ALICE chat "alice$i" mailer "alice$i-$RUN" "email carol$i@example.com"
	expect "alice's email $i runs" "data/alice$i.sse" '"type":"tool-output-available".*"output":\{"subject":"hello","to":"carol'"$i"'@example.com"\}'
done
KEY=$ALICE chat alice4 mailer "alice4-$RUN" "email dave@example.com"
expect "alice's 4th email in the hour is blocked" data/alice4.sse '"type":"tool-output-available".*"output":"send_email may run at most 3 times an hour per caller"'
expect "the model says the limit is reached" data/alice4.txt 'hourly email limit'
KEY=$BOB chat bob1 mailer "bob1-$RUN" "email erin@example.com"
expect "bob's first email runs: the count is per caller" data/bob1.sse '"type":"tool-output-available".*"output":\{"subject":"hello","to":"erin@example.com"\}'
audit alice4 "alice4-$RUN"
expect "the audit record holds the count the rule read" data/alice4.audit '"action":"block".*"state":\{"emails_per_hour":3\}'
finish
