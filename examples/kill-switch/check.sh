#!/usr/bin/env bash
# Shows an operator's kill switch: set from the CLI, it stops one tenant's
# weather calls (and, a second one, every turn of the agent) until lifted,
# through a rules reload and a restart.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway
TG=${TURNGATE:-$PWD/data/turngate}
export TURNGATE_URL=$BASE TURNGATE_ADMIN_KEY=ops-demo-255485b16c443fec1d4b3e41c9dcb104
STOPPED="This tool call was stopped by the operator's kill switch."

# A run that failed half-way may have left switches in force: lift them.
for id in $("$TG" killswitch list --json | grep -o 'ks_[0-9a-f-]*'); do
	"$TG" killswitch lift --reason "check.sh: left by an earlier run" "$id"
done

KEY=acme-demo-0803cf7b2d044192a24b16c8565e68a5 chat before assistant "acme-$RUN" "weather in Lima"
expect "before any switch acme's weather call runs" data/before.sse '"type":"tool-output-available".*"output":\{"city":"Lima"'

"$TG" killswitch set --block tools --tool 'weath*' --tenant acme --reason "incident 42: the weather provider leaks locations" | tee data/set.txt
ID=$(grep -o 'ks_[0-9a-f-]*' data/set.txt)
expect "the CLI names the switch it set" data/set.txt "^set $ID: tool calls of weath\* in tenant acme, until lifted"

KEY=acme-demo-0803cf7b2d044192a24b16c8565e68a5 chat stopped assistant "acme-$RUN" "weather in Lima"
expect "acme's weather call is stopped; the model sees the fixed reason" data/stopped.sse "\"type\":\"tool-output-available\".*\"output\":\"$STOPPED\""
expect_no "the weather tool did not run" data/stopped.sse '"output":\{"city"'
KEY=globex-demo-c17f818adf87d48aef3df478ad529aec chat globex assistant "globex-$RUN" "weather in Oslo"
expect "globex's weather call runs" data/globex.sse '"output":\{"city":"Oslo"'
KEY=acme-demo-0803cf7b2d044192a24b16c8565e68a5 chat search assistant "acme-s-$RUN" "search incident reports"
expect "acme's other tools run" data/search.sse '"output":\{"limit":1,'

KEY=ops-demo-255485b16c443fec1d4b3e41c9dcb104 post reload /v1/admin/rules/reload '{}'
KEY=acme-demo-0803cf7b2d044192a24b16c8565e68a5 chat reloaded assistant "acme-$RUN" "weather in Lima"
expect "a rules reload does not lift it" data/reloaded.sse "\"output\":\"$STOPPED\""

stop_gateway
start_gateway
KEY=acme-demo-0803cf7b2d044192a24b16c8565e68a5 chat restarted assistant "acme-$RUN" "weather in Lima"
expect "a restart does not lift it" data/restarted.sse "\"output\":\"$STOPPED\""
KEY=ops-demo-255485b16c443fec1d4b3e41c9dcb104 get rules /v1/admin/rules >/dev/null
expect "/v1/admin/rules shows it" data/rules.json "\"killSwitches\":\[\{\"id\":\"$ID\""
KEY=ops-demo-255485b16c443fec1d4b3e41c9dcb104 get ready /readyz
expect "/readyz counts it (to a request with a key)" data/ready.json '"killSwitches":1'

"$TG" killswitch set --block turns --agent assistant --reason "runaway agent" --expires-in 1h | tee data/turns.txt
TURNS=$(grep -o 'ks_[0-9a-f-]*' data/turns.txt)
KEY=globex-demo-c17f818adf87d48aef3df478ad529aec post refused "/v1/agents/assistant/sessions/globex-t-$RUN/messages" '{"text":"hello"}'
expect "every turn of the agent is refused before the model is called" data/refused.out '"code":"kill_switch","message":"This turn was stopped by the operator.s kill switch."'
"$TG" killswitch list | tee data/list.txt
expect "the list shows both switches" data/list.txt "^$TURNS +every turn in agent assistant, until 20"
expect "the list names who set them" data/list.txt "^$ID .* oncall +incident 42"

"$TG" killswitch lift --reason "provider fixed" "$ID"
"$TG" killswitch lift --reason "agent fixed" "$TURNS"
KEY=acme-demo-0803cf7b2d044192a24b16c8565e68a5 chat lifted assistant "acme-$RUN" "weather in Lima"
expect "once lifted acme's weather call runs again" data/lifted.sse '"output":\{"city":"Lima"'

expect "the audit log says who set it and why" data/audit.log "\"action\":\"set\".*\"by\":\"oncall\".*\"reason\":\"incident 42: the weather provider leaks locations\".*\"id\":\"$ID\""
expect "the audit log says who lifted it and why" data/audit.log "\"action\":\"lifted\".*\"by\":\"oncall\".*\"reason\":\"provider fixed\".*\"id\":\"$ID\""
expect "each stopped call is a decision naming the switch" data/audit.log "\"hook\":\"beforeToolCall\".*\"rulesFired\":\[\"killswitch/$ID\"\]"
curl -sS "$BASE/metrics" >data/metrics.txt
expect "the metrics count the stops by scope kind" data/metrics.txt '^turngate_killswitch_stops_total\{scope="tenant",what="tool_call"\} 1$'
expect "and the refused turns" data/metrics.txt '^turngate_killswitch_stops_total\{scope="agent",what="turn"\} 1$'
finish
