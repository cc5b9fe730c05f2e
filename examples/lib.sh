# lib.sh is what every example's check.sh shares. A check.sh sources it from
# its own folder, starts the gateway there on the example's turngate.yaml,
# sends requests with curl and checks what a client would see. Needs bash,
# curl and Go (or a built binary in $TURNGATE).
#
#   TURNGATE=/path/to/turngate ./check.sh   use this binary instead of building one
#   PORT=8181 ./check.sh                     listen on this port (default: a random one)
#
# Everything a run writes lands in ./data: the SQLite store, audit.log, the
# gateway's log (gateway.log) and each response (NAME.sse / NAME.json, with
# the streamed text in NAME.txt).

set -euo pipefail

EXAMPLE=$(basename "$PWD")

# random_port picks a port below Linux's ephemeral range (32768–60999, where
# outgoing connections take their local ports, so one of them may hold any
# port there).
random_port() {
	echo $((20000 + RANDOM % 12000))
}

# PORT_GIVEN is set when the caller chose PORT: start_gateway then does not
# move to another port when it is taken.
PORT_GIVEN=${PORT:+yes}
PORT=${PORT:-$(random_port)}
BASE=http://127.0.0.1:$PORT
# RUN makes session ids unique, so a rerun never collides with the
# sessions an earlier run stored.
RUN=$(date +%s)$$
KEY=${KEY:-}
FAILED=0
GATEWAY_PID=
# BACKGROUND_PIDS are other processes a check.sh started (see background).
BACKGROUND_PIDS=()

mkdir -p data
trap cleanup EXIT

# cleanup stops the gateway and every background process.
cleanup() {
	stop_gateway
	for pid in "${BACKGROUND_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}

# background CMD... runs CMD in the background until the script exits; its
# output goes to data/background.log.
background() {
	"$@" >>data/background.log 2>&1 &
	BACKGROUND_PIDS+=($!)
}

# start_gateway builds turngate (unless $TURNGATE names a binary), starts
# `turngate serve --config turngate.yaml` from this folder and waits until
# it serves: its log says so and /healthz answers (another process on the
# port cannot pass for it). A random port that turns out to be taken is
# replaced by another, up to five times. The gateway is stopped when the
# script exits.
start_gateway() {
	local bin=${TURNGATE:-}
	if [[ -z $bin ]]; then
		echo "building turngate (set TURNGATE to use a built binary)…"
		go build -o data/turngate ../../cmd/turngate
		bin=$PWD/data/turngate
	fi
	local attempt
	for attempt in 1 2 3 4 5; do
		"$bin" serve --config turngate.yaml --listen "127.0.0.1:$PORT" >data/stdout.log 2>data/gateway.log &
		GATEWAY_PID=$!
		if wait_serving; then
			echo "turngate serving $EXAMPLE on $BASE"
			return 0
		fi
		GATEWAY_PID=
		if [[ -z $PORT_GIVEN && $attempt -lt 5 ]] && grep -q 'address already in use' data/gateway.log; then
			PORT=$(random_port)
			BASE=http://127.0.0.1:$PORT
			continue
		fi
		echo "turngate exited before serving:" >&2
		tail -n 5 data/gateway.log >&2
		exit 1
	done
}

# wait_serving waits until the gateway started last serves (true), or has
# exited (false); it ends the script after 60 s.
wait_serving() {
	for _ in $(seq 1 600); do
		if ! kill -0 "$GATEWAY_PID" 2>/dev/null; then
			wait "$GATEWAY_PID" 2>/dev/null || true
			return 1
		fi
		if grep -q 'turngate serving' data/gateway.log && curl -sf "$BASE/healthz" >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	echo "turngate did not answer /healthz within 60s" >&2
	exit 1
}

# stop_gateway stops the gateway this script started.
stop_gateway() {
	if [[ -n $GATEWAY_PID ]]; then
		kill "$GATEWAY_PID" 2>/dev/null || true
		wait "$GATEWAY_PID" 2>/dev/null || true
		GATEWAY_PID=
	fi
}

# post NAME PATH JSON sends JSON to PATH and saves the response body as
# data/NAME.out.
post() {
	local name=$1 path=$2 body=$3
	local auth=()
	[[ -n $KEY ]] && auth=(-H "Authorization: Bearer $KEY")
	curl -sS -N "${auth[@]}" -H 'Content-Type: application/json' -d "$body" "$BASE$path" >"data/$name.out"
}

# get NAME PATH saves the JSON at PATH as data/NAME.json and prints it.
get() {
	local name=$1 path=$2
	local auth=()
	[[ -n $KEY ]] && auth=(-H "Authorization: Bearer $KEY")
	curl -sS "${auth[@]}" "$BASE$path" >"data/$name.json"
	cat "data/$name.json"
	echo
}

# chat NAME AGENT SESSION TEXT [EXTRA] sends a user message the way the AI
# SDK's DefaultChatTransport does; EXTRA are more members of the body (the
# turn's custom body), e.g. '"mode":"read-only"'. The UI message stream is
# saved as data/NAME.sse, its text as data/NAME.txt, and shown condensed.
chat() {
	local name=$1 agent=$2 session=$3 text=$4 extra=${5:-}
	[[ -n $extra ]] && extra=",$extra"
	post "$name" "/v1/agents/$agent/chat" \
		"{\"id\":\"$session\",\"trigger\":\"submit-message\",\"messages\":[{\"id\":\"$name-$RUN\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"$text\"}]}]$extra}"
	mv "data/$name.out" "data/$name.sse"
	stream_text "data/$name.sse" >"data/$name.txt"
	show_stream "$name"
}

# send_chat NAME AGENT BODY posts a complete chat body (for continuations,
# which send the assistant message back with tool outputs).
send_chat() {
	local name=$1 agent=$2 body=$3
	post "$name" "/v1/agents/$agent/chat" "$body"
	mv "data/$name.out" "data/$name.sse"
	stream_text "data/$name.sse" >"data/$name.txt"
	show_stream "$name"
}

# stream_text prints the text a UI message stream spelled out.
stream_text() {
	{ grep -E '"type":"text-(delta|end)"' "$1" || true; } |
		sed -e '/"type":"text-end"/s/.*/\\n/' -e 's/.*"delta":"\(\([^"\\]\|\\.\)*\)".*/\1/' |
		tr -d '\n' | sed 's/\\"/"/g; s/\\n/\n/g'
}

# show_stream NAME prints the stream's chunks without the deltas, then
# its text.
show_stream() {
	echo "── $1: stream (deltas folded) ──"
	grep '^data: ' "data/$1.sse" | grep -v -- '-delta"' | sed 's/^data: /  /' || true
	echo "── $1: text ──"
	sed 's/^/  /' "data/$1.txt"
}

# field NAME KEY prints the first string value of "KEY" in data/NAME.sse
# (e.g. the messageId of the start chunk, or a toolCallId).
field() {
	grep -o "\"$2\":\"[^\"]*\"" "data/$1.sse" | head -n 1 | sed 's/.*:"\(.*\)"/\1/'
}

# audit NAME SESSION [TURNS] waits until the audit log (./data/audit.log)
# holds TURNS (default 1) turn records of SESSION, saves its records as
# data/NAME.audit and shows those of hooks that had rules to run.
audit() {
	local name=$1 session=$2 turns=${3:-1}
	for _ in $(seq 1 100); do
		grep -F "\"sessionId\":\"$session\"" data/audit.log >"data/$name.audit" 2>/dev/null || true
		(($(grep -c '"kind":"turn"' "data/$name.audit") >= turns)) && break
		sleep 0.1
	done
	echo "── $name: audit records ──"
	grep -v '"outcome":"not_evaluated"' "data/$name.audit" | sed 's/^/  /' || true
}

# without_input filters audit records, dropping each decision record's
# evaluated input (for replay), so a grep sees only the decision and what
# the rules chose, not the unchanged context they read.
without_input() {
	sed 's/,"input":.*,"kind":"decision"/,"kind":"decision"/'
}

# expect WHAT FILE REGEX passes when a line of FILE matches the extended
# regular expression REGEX.
expect() {
	if grep -Eq -- "$3" "$2"; then
		echo "  ✓ $1"
	else
		echo "  ✗ $1: no match for /$3/ in $2"
		FAILED=1
	fi
}

# expect_no WHAT FILE REGEX passes when no line of FILE matches REGEX.
expect_no() {
	if grep -Eq -- "$3" "$2"; then
		echo "  ✗ $1: unexpected match for /$3/ in $2"
		FAILED=1
	else
		echo "  ✓ $1"
	fi
}

# expect_same WHAT FILE1 FILE2 passes when the two files are identical.
expect_same() {
	if cmp -s "$2" "$3"; then
		echo "  ✓ $1"
	else
		echo "  ✗ $1: diff $2 $3"
		FAILED=1
	fi
}

# finish exits 0 when every expectation held, 1 otherwise.
finish() {
	if ((FAILED)); then
		echo "FAIL: $EXAMPLE (logs in $PWD/data)"
		exit 1
	fi
	echo "PASS: $EXAMPLE"
}
