#!/usr/bin/env bash
# Shows the live configuration: a key added to turngate.yaml works without
# a restart; a broken edit and a change that needs a restart are refused
# with their line and column while the last good config keeps serving.
cd "$(dirname "$0")"
source ../lib.sh
# The edits below change turngate.yaml; put it back however the script ends.
cp turngate.yaml data/turngate.yaml.orig
trap 'cp data/turngate.yaml.orig turngate.yaml; cleanup' EXIT
start_gateway
OPS=ops-demo-7c0e1d4b9a3f2e6d8b5a4c3e2f1d0a9b
ACME=acme-demo-5b8e2f1c9d4a7e3b6c0f8a2d4e1b7c9f
GLOBEX=globex-demo-3d9f7a1e5c2b8d4f6a0e9c7b1d3f5a2e

# edit SED_SCRIPT changes turngate.yaml as an editor saves: a new file
# renamed over the old one.
edit() {
	sed -e "$1" turngate.yaml >data/turngate.yaml.next
	mv data/turngate.yaml.next turngate.yaml
}

# wait_config NAME REGEX polls GET /v1/admin/config (saved as
# data/NAME.json) until it matches REGEX, for up to 30 s.
wait_config() {
	for _ in $(seq 1 300); do
		KEY=$OPS get "$1" /v1/admin/config >/dev/null
		grep -Eq -- "$2" "data/$1.json" && break
		sleep 0.1
	done
	echo "── $1: GET /v1/admin/config ──"
	sed 's/^/  /' "data/$1.json"
}

KEY=$GLOBEX post before "/v1/agents/assistant/sessions/globex-$RUN/messages" '{"text":"weather in Oslo"}'
expect "globex's key is refused before the config names it" data/before.out '"code":"unauthorized"'

echo "adding globex's key to turngate.yaml…"
printf '    - {key: %s, tenant: globex, subject: bob}\n' "$GLOBEX" >>turngate.yaml
wait_config added '"reloadsOk":1'
expect "the reload was accepted" data/added.json '"reloadsOk":1,"reloadsRejected":0'
KEY=$GLOBEX chat added assistant "globex-$RUN" "weather in Oslo"
expect "globex's key works without a restart" data/added.sse '"output":\{"city":"Oslo"'

echo "a broken edit: maxMessages: -1…"
edit 's/maxMessages: 200/maxMessages: -1/'
wait_config broken '"lastError"'
expect "the rejection names file, line and column" data/broken.json '"lastError":\[\{"code":"config_invalid","location":\{"file":"turngate.yaml","line":55,"column":16\},"message":"limits.maxMessages: must not be negative, not -1"'
curl -sS "$BASE/metrics" >data/broken.metrics
expect "turngate_config_reload_rejected says so" data/broken.metrics '^turngate_config_reload_rejected 1$'
KEY=$ACME chat acme-still assistant "acme-$RUN" "weather in Lima"
expect "acme's key of the last good config still works" data/acme-still.sse '"output":\{"city":"Lima"'
KEY=$GLOBEX chat globex-still assistant "globex-$RUN" "weather in Oslo"
expect "and so does globex's" data/globex-still.sse '"output":\{"city":"Oslo"'

echo "a change that needs a restart: store.path…"
edit 's/maxMessages: -1/maxMessages: 200/; s#path: data/turngate.db#path: data/other.db#'
wait_config restart '"restart_required"'
expect "it is refused, naming the field at its line" data/restart.json '"code":"restart_required","location":\{"file":"turngate.yaml","line":48,"column":9\},"field":"store.path","message":"store.path changed: needs a restart"'
KEY=$GLOBEX chat globex-kept assistant "globex-$RUN" "weather in Oslo"
expect "globex's key still works: nothing was half-applied" data/globex-kept.sse '"output":\{"city":"Oslo"'

echo "the store path put back…"
edit 's#path: data/other.db#path: data/turngate.db#'
wait_config healed '"lastCheck":"[^"]*","reloadsOk"'
expect_no "the rejection is cleared" data/healed.json '"lastError"'
curl -sS "$BASE/metrics" >data/healed.metrics
expect "turngate_config_reload_rejected is 0 again" data/healed.metrics '^turngate_config_reload_rejected 0$'
finish
