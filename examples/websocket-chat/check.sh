#!/usr/bin/env bash
# Chats over the WebSocket (GET /v1/agents/files/ws) with client/: a text
# turn, a delete the Rego rule blocks (the model relays the reason), two
# requests at once on one connection, the API key sent as a subprotocol or
# as ?key=, and a wrong key refused before the upgrade.
cd "$(dirname "$0")"
source ../lib.sh

echo "building the WebSocket client…"
go build -o data/client ./client
start_gateway
WS=ws://127.0.0.1:$PORT/v1/agents/files/ws
KEY=ws-demo-8d1ab145aaa8dd4bc74bd745d08a9630

# ws NAME CLIENT-ARGS… runs the client, saves its frames as data/NAME.frames
# and shows them.
ws() {
	local name=$1
	shift
	data/client -url "$WS" -session "$name-$RUN" "$@" >"data/$name.frames" 2>&1 || true
	echo "── $name: frames ──"
	sed 's/^/  /' "data/$name.frames"
}

ws text -key "$KEY" -auth subprotocol "hello"
expect "the key as a subprotocol: the gateway selects turngate.chat.v1" data/text.frames '^connected, subprotocol "turngate.chat.v1"'
expect "a text turn streams its text as chunk frames" data/text.frames '^r1 text: Hello over the WebSocket\.$'
expect "and ends" data/text.frames '"type":"end","requestId":"r1"|"requestId":"r1".*"type":"end"'

ws blocked -key "$KEY" -auth query "delete /etc/hosts"
expect "the key as ?key= is accepted" data/blocked.frames '^connected'
expect "the Rego rule blocks the delete: its output is the reason" data/blocked.frames '"type":"tool-output-available".*"output":"deleting /etc/hosts is not allowed"'
expect "the model sees the reason" data/blocked.frames '^r1 text: Deleting /etc/hosts\. The delete tool said: deleting /etc/hosts is not allowed$'

ws both -key "$KEY" "hello" "delete notes.txt"
expect "two requests on one connection: r1 ends" data/both.frames '"type":"end","requestId":"r1"|"requestId":"r1".*"type":"end"'
expect "r2 ends too" data/both.frames '"type":"end","requestId":"r2"|"requestId":"r2".*"type":"end"'
expect "r1 answered the greeting" data/both.frames '^r1 text: Hello over the WebSocket\.$'
expect "r2 ran the allowed delete" data/both.frames '"requestId":"r2".*"type":"tool-output-available".*"deleted":"notes.txt"'

ws wrongkey -key not-the-key "hello"
expect "a wrong key is refused before the upgrade" data/wrongkey.frames 'handshake refused: 401'
expect_no "and nothing runs" data/wrongkey.frames '"type":"start"'
finish
