#!/usr/bin/env bash
# Shows the same request allowed for acme and blocked for globex.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway

KEY=acme-demo-c684be9cfe28208d032c12282d43a9ea chat acme assistant "acme-$RUN" "search quarterly results"
expect "acme's search runs" data/acme.sse '"type":"tool-output-available".*"output":\{"limit":1,'

KEY=globex-demo-2f22ae2f8e9a343fa5adaa206122698f chat globex assistant "globex-$RUN" "search quarterly results"
expect "globex's search is blocked" data/globex.sse '"type":"tool-output-available".*"output":"tool \\"search\\" is not enabled for tenant \\"globex\\""'
audit globex "globex-$RUN"
expect "the audit log records the block for tenant globex" data/globex.audit '"action":"block".*"hook":"beforeToolCall".*"tenant":"globex"'

KEY=globex-demo-2f22ae2f8e9a343fa5adaa206122698f chat globex-weather assistant "globex-wx-$RUN" "weather in Berlin"
expect "globex may check the weather" data/globex-weather.sse '"type":"tool-output-available".*"output":\{"city":"Berlin"'
finish
