#!/usr/bin/env bash
# Shows POST /v1/messages as Claude's SDK calls it: a server tool run by the
# gateway, a declared client tool returned as tool_use and its tool_result
# sent back, a streamed answer's named events, a client tool call the rules
# block, and Anthropic's error body.
cd "$(dirname "$0")"
source ../lib.sh
start_gateway
ACME=acme-demo-5f1c0e2d9b8a47361c2d3e4f5a6b7c8d

# messages NAME BODY posts BODY to /v1/messages with x-api-key, as
# Anthropic's curl examples do, saving the answer as data/NAME.out.
messages() {
	curl -sS -N -H "x-api-key: ${KEY:-$ACME}" -H 'anthropic-version: 2023-06-01' -H 'Content-Type: application/json' \
		-d "$2" "$BASE/v1/messages" >"data/$1.out"
	cat "data/$1.out"
	echo
}
LOCATION='"tools":[{"name":"get_location","description":"Ask the device where the user is.","input_schema":{"type":"object","properties":{}}}]'
DELETE='"tools":[{"name":"delete_file","description":"Delete a file on the device.","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}]'

messages weather '{"model":"assistant","max_tokens":256,"messages":[{"role":"user","content":"weather in Lima"}]}'
expect "the server tool ran in the gateway: the answer is text" data/weather.out '"content":\[\{"text":"Let me check the weather in Lima.","type":"text"\},\{"text":"Here is the weather: \{.*Lima'
expect "it ended the turn" data/weather.out '"stop_reason":"end_turn"'

messages where "{\"model\":\"assistant\",\"max_tokens\":256,$LOCATION,\"messages\":[{\"role\":\"user\",\"content\":\"where am i\"}]}"
expect "a declared tool comes back as tool_use" data/where.out '"id":"call_0_0","input":\{\},"name":"get_location","type":"tool_use"'
expect "stop_reason says so" data/where.out '"stop_reason":"tool_use"'

messages located "{\"model\":\"assistant\",\"max_tokens\":256,$LOCATION,\"messages\":[{\"role\":\"user\",\"content\":\"where am i\"},
 {\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"call_0_0\",\"name\":\"get_location\",\"input\":{}}]},
 {\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call_0_0\",\"content\":\"Lisbon\"}]}]}"
expect "the tool_result continues the turn" data/located.out '"text":"You are in Lisbon."'

messages stream "{\"model\":\"assistant\",\"max_tokens\":256,\"stream\":true,$LOCATION,\"messages\":[{\"role\":\"user\",\"content\":\"where am i\"}]}"
expect "a stream opens with message_start" data/stream.out '^event: message_start'
expect "the tool call streams as input_json_delta" data/stream.out '"partial_json":"\{\}","type":"input_json_delta"'
expect "and ends with message_delta and message_stop" data/stream.out '"stop_reason":"tool_use"'
expect "message_stop is the last event" data/stream.out '^event: message_stop'
expect_no "no [DONE]: Anthropic's streams have none" data/stream.out 'DONE'

messages delete "{\"model\":\"assistant\",\"max_tokens\":256,$DELETE,\"messages\":[{\"role\":\"user\",\"content\":\"delete notes.txt\"}]}"
expect "the rule blocked the client's delete_file: the model was told" data/delete.out 'Delete said: .*deleting files is not allowed from Claude clients'
expect_no "no tool_use reached the client" data/delete.out '"type":"tool_use"'
expect "the decision record names the entry path" data/audit.log '"hook":"beforeToolCall".*"entryPath":"anthropic"'

messages typo '{"model":"assistant","max_token":256,"messages":[{"role":"user","content":"hi"}]}'
expect "a misspelt field is Anthropic's invalid_request_error with a did-you-mean" data/typo.out '"type":"invalid_request_error".*did you mean \\"max_tokens\\"|did you mean \\"max_tokens\\".*"type":"invalid_request_error"'
KEY=wrong messages nokey '{"model":"assistant","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
expect "a wrong key is authentication_error" data/nokey.out '"type":"authentication_error"'
finish
