package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/tracing/otlptest"
)

// The trace context a traced test request comes with.
const (
	incomingTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingSpanID  = "00f067aa0ba902b7"
	incomingParent  = "00-" + incomingTraceID + "-" + incomingSpanID + "-01"
)

// newOTLPReceiver starts an in-process OTLP/HTTP collector.
func newOTLPReceiver(t *testing.T) (*otlptest.Receiver, string) {
	t.Helper()
	recv := &otlptest.Receiver{}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	return recv, srv.URL
}

// headerLog records one header of every request a test server receives.
type headerLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *headerLog) add(v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, v)
}

func (l *headerLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// fakeOpenAI is an upstream OpenAI-compatible model: a request whose last
// message is not a tool result gets a call of the lookup tool, one after a
// tool result gets a text answer. It logs each request's traceparent.
func fakeOpenAI(t *testing.T, parents *headerLog) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parents.add(r.Header.Get("traceparent"))
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(s string) { fmt.Fprintf(w, "data: %s\n\n", s) }
		if req.Messages[len(req.Messages)-1].Role != "tool" {
			chunk(`{"id":"c1","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"id\":\"42\"}"}}]},"finish_reason":null}]}`)
			chunk(`{"id":"c1","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
			chunk(`{"id":"c1","object":"chat.completion.chunk","model":"gpt-test","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`)
		} else {
			chunk(`{"id":"c2","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"Order 42 has shipped."},"finish_reason":null}]}`)
			chunk(`{"id":"c2","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
			chunk(`{"id":"c2","object":"chat.completion.chunk","model":"gpt-test","choices":[],"usage":{"prompt_tokens":23,"completion_tokens":5,"total_tokens":28}}`)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// tracedSetup is a gateway with an OpenAI-compatible upstream, an HTTP
// tool and (when tracing) an OTLP receiver.
type tracedSetup struct {
	run                         *running
	otlp                        *otlptest.Receiver
	upstream, lookup, extension *headerLog
}

// startTraced serves an agent whose model calls the http tool lookup once,
// then answers (a two-step tool turn), with a Rego rule on tool calls and
// an http extension subscribed to beforeTurn.
func startTraced(t *testing.T, tracing bool) *tracedSetup {
	t.Helper()
	s := &tracedSetup{upstream: &headerLog{}, lookup: &headerLog{}, extension: &headerLog{}}
	model := fakeOpenAI(t, s.upstream)
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.lookup.add(r.Header.Get("traceparent"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"shipped"}`)
	}))
	t.Cleanup(tool.Close)
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.extension.add(r.Header.Get("traceparent"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{}`)
	}))
	t.Cleanup(ext.Close)
	dir := t.TempDir()
	rules := writeRules(t, dir)
	cfg := `providers: [{name: up, type: openai, baseURL: "` + model.URL + `"}]
models: {smart: {provider: up, model: gpt-test}}
tools:
  - name: lookup
    description: Look up an order.
    inputSchema: {type: object, properties: {id: {type: string}}, required: [id]}
    http: {url: "` + tool.URL + `/lookup"}
agents:
  - {name: support, model: smart, tools: [lookup]}
store: {path: ` + filepath.Join(dir, "t.db") + `}
rules: {dir: ` + rules + `, watch: false}
audit: {sink: none}
extensions:
  - {name: observer, transport: http, url: "` + ext.URL + `", secret: 0123456789abcdef0123456789abcdef, hooks: [beforeTurn], timeout: 5s}
`
	if tracing {
		var url string
		s.otlp, url = newOTLPReceiver(t)
		cfg += `tracing: {enabled: true, endpoint: "` + url + `", serviceName: turngate-test, headers: {Authorization: "Bearer collector-token"}}
`
	}
	path := filepath.Join(dir, "turngate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s.run = startServe(t, path)
	return s
}

// post sends body to path with a traceparent header (none when empty) and
// returns the response body; it fails t unless the status is want.
func (s *tracedSetup) post(t *testing.T, path, traceparent, body string, want int) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+s.run.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		req.Header.Set("traceparent", traceparent)
		req.Header.Set("tracestate", "vendor=opaque")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, data)
	}
	return string(data)
}

// stop shuts the gateway down, which exports the buffered spans.
func (s *tracedSetup) stop(t *testing.T) {
	t.Helper()
	if err := s.run.stop(); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.run.stderr)
	}
}

const chatBody = `{"id":"s1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"Where is order 42?"}]}]}`

// span is one received span.
type span = otlptest.Span

// traceTree indexes spans by id and name.
type traceTree struct {
	t     *testing.T
	spans []span
}

// one returns the single span named name, failing if there is not
// exactly one.
func (tr traceTree) one(name string) span {
	tr.t.Helper()
	got := tr.named(name)
	if len(got) != 1 {
		tr.t.Fatalf("%d spans named %q, want 1; spans: %v", len(got), name, tr.names())
	}
	return got[0]
}

func (tr traceTree) named(name string) []span {
	var out []span
	for _, s := range tr.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr traceTree) children(parent span) []span {
	var out []span
	for _, s := range tr.spans {
		if s.ParentSpanID == parent.SpanID && s.TraceID == parent.TraceID {
			out = append(out, s)
		}
	}
	return out
}

func (tr traceTree) names() []string {
	var out []string
	for _, s := range tr.spans {
		out = append(out, s.Name)
	}
	return out
}

// wantAttrs fails unless s has each attribute of want.
func wantAttrs(t *testing.T, s span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Attributes[k]; !ok || fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("span %q: attribute %s = %v (present %v), want %v", s.Name, k, got, ok, v)
		}
	}
}

// parentOf returns the span id in a traceparent header, failing t unless
// its trace id is traceID.
func parentOf(t *testing.T, header, traceID string) string {
	t.Helper()
	parts := strings.Split(header, "-")
	if len(parts) != 4 || parts[0] != "00" || parts[1] != traceID {
		t.Fatalf("traceparent %q: want version 00 and trace id %s", header, traceID)
	}
	return parts[2]
}

// TestTracingTwoStepToolTurn runs a two-step tool turn over the real
// server with a traceparent and checks what an OTLP collector receives:
// the turn → step → model call / tool call tree in the caller's trace, with
// the GenAI attributes and the policy decision as an event, and that the
// upstream model and the HTTP tool got the trace context of their spans.
func TestTracingTwoStepToolTurn(t *testing.T) {
	s := startTraced(t, true)
	out := s.post(t, "/v1/agents/support/chat", incomingParent, chatBody, http.StatusOK)
	if !strings.Contains(out, "Order 42 has shipped.") {
		t.Fatalf("chat stream: %s", out)
	}
	s.stop(t)
	tree := traceTree{t: t, spans: s.otlp.Spans()}

	turn := tree.one("invoke_agent support")
	if turn.TraceID != incomingTraceID || turn.ParentSpanID != incomingSpanID {
		t.Fatalf("turn span: trace %s parent %s, want the incoming %s / %s", turn.TraceID, turn.ParentSpanID, incomingTraceID, incomingSpanID)
	}
	if turn.Service != "turngate-test" {
		t.Errorf("service.Name = %q, want turngate-test", turn.Service)
	}
	wantAttrs(t, turn, map[string]any{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support", "gen_ai.conversation.id": "s1",
		"gen_ai.request.model": "smart", "turngate.tenant": "default", "turngate.entry_path": "chat",
		"turngate.turn.status": "completed", "turngate.turn.steps": 2,
		"gen_ai.usage.input_tokens": 34, "gen_ai.usage.output_tokens": 12,
	})
	steps := tree.named("turngate.step")
	if len(steps) != 2 {
		t.Fatalf("%d step spans, want 2: %v", len(steps), tree.names())
	}
	chats := tree.named("chat gpt-test")
	tools := tree.named("execute_tool lookup")
	if len(chats) != 2 || len(tools) != 1 {
		t.Fatalf("%d chat spans and %d tool spans, want 2 and 1: %v", len(chats), len(tools), tree.names())
	}
	wantUsage := []struct {
		in, out int
		finish  string
	}{{11, 7, "tool_calls"}, {23, 5, "stop"}}
	for _, step := range steps {
		if step.ParentSpanID != turn.SpanID || step.TraceID != incomingTraceID {
			t.Errorf("step span %v: not a child of the turn span", step.Attributes)
		}
		n := step.Attributes["turngate.step.number"].(int64)
		kids := tree.children(step)
		var names []string
		for _, k := range kids {
			names = append(names, k.Name)
		}
		slices.Sort(names)
		want := []string{"chat gpt-test"}
		if n == 0 {
			want = []string{"chat gpt-test", "execute_tool lookup"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("step %d children %v, want %v", n, names, want)
		}
		for _, k := range kids {
			if k.Name == "chat gpt-test" {
				u := wantUsage[n]
				wantAttrs(t, k, map[string]any{
					"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-test", "gen_ai.provider.name": "openai",
					"gen_ai.usage.input_tokens": u.in, "gen_ai.usage.output_tokens": u.out,
					"gen_ai.response.finish_reasons": []string{u.finish}, "turngate.model": "smart",
				})
			}
		}
	}
	tool := tools[0]
	wantAttrs(t, tool, map[string]any{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup", "gen_ai.tool.call.id": "call_1",
		"turngate.tool.decision": "allow", "turngate.tool.kind": "http",
	})
	var hooks []string
	for _, e := range tool.Events {
		if e.Name != "turngate.policy.decision" {
			continue
		}
		hooks = append(hooks, fmt.Sprint(e.Attributes["turngate.policy.hook"]))
		if rev, _ := e.Attributes["turngate.policy.revision"].(string); !strings.HasPrefix(rev, "sha256:") {
			t.Errorf("decision event %v: no rule revision", e.Attributes)
		}
		if e.Attributes["turngate.policy.hook"] == "beforeToolCall" && e.Attributes["turngate.policy.outcome"] != "no_match" {
			t.Errorf("beforeToolCall decision event %v: want outcome no_match", e.Attributes)
		}
	}
	if !slices.Equal(hooks, []string{"beforeToolCall", "toolResult"}) {
		t.Errorf("tool span decision events for hooks %v, want beforeToolCall, toolResult", hooks)
	}
	for _, sp := range tree.spans {
		for k, v := range sp.Attributes {
			if str, ok := v.(string); ok && (strings.Contains(str, "order 42") || strings.Contains(str, "shipped")) {
				t.Errorf("span %q attribute %s carries message content: %q", sp.Name, k, str)
			}
		}
	}

	// The upstream model got the trace context of each chat span, the
	// HTTP tool that of its execute_tool span.
	ups := s.upstream.all()
	if len(ups) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(ups))
	}
	chatIDs := []string{chats[0].SpanID, chats[1].SpanID}
	for _, h := range ups {
		if p := parentOf(t, h, incomingTraceID); !slices.Contains(chatIDs, p) {
			t.Errorf("upstream traceparent %q: parent %s is not a chat span %v", h, p, chatIDs)
		}
	}
	lookups := s.lookup.all()
	if len(lookups) != 1 || parentOf(t, lookups[0], incomingTraceID) != tool.SpanID {
		t.Errorf("HTTP tool traceparents %v, want one with the tool span %s as parent", lookups, tool.SpanID)
	}
	if exts := s.extension.all(); len(exts) != 1 || parentOf(t, exts[0], incomingTraceID) != turn.SpanID {
		t.Errorf("extension beforeTurn traceparents %v, want one with the turn span %s as parent", exts, turn.SpanID)
	}
	if h := s.otlp.Headers(); len(h) == 0 || h[0].Get("Authorization") != "Bearer collector-token" {
		t.Errorf("exports' headers %v, want the configured Authorization", h)
	}
}

// TestTracingMalformedTraceparent checks that a request whose traceparent
// is malformed runs normally in a new trace.
func TestTracingMalformedTraceparent(t *testing.T) {
	for _, bad := range []string{
		"00-" + incomingTraceID + "-" + incomingSpanID,            // no flags
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
		"zz-" + incomingTraceID + "-" + incomingSpanID + "-01",    // bad version
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
		strings.Repeat("x", 4096),
	} {
		t.Run(bad[:min(len(bad), 20)], func(t *testing.T) {
			s := startTraced(t, true)
			s.post(t, "/v1/agents/support/chat", bad, chatBody, http.StatusOK)
			s.stop(t)
			tree := traceTree{t: t, spans: s.otlp.Spans()}
			turn := tree.one("invoke_agent support")
			if turn.ParentSpanID != "" || turn.TraceID == incomingTraceID || turn.TraceID == strings.Repeat("0", 32) {
				t.Errorf("turn span: trace %s parent %q, want a new root trace", turn.TraceID, turn.ParentSpanID)
			}
			for _, h := range s.upstream.all() {
				parentOf(t, h, turn.TraceID)
			}
		})
	}
}

// TestTracingSubmissionContinuesTrace checks that an async submission
// stores its request's trace context: the turn a worker runs later is in
// the caller's trace.
func TestTracingSubmissionContinuesTrace(t *testing.T) {
	s := startTraced(t, true)
	out := s.post(t, "/v1/agents/support/sessions/s2/messages", incomingParent, `{"text":"Where is order 42?","async":true}`, http.StatusAccepted)
	var accepted struct {
		SubmissionID string `json:"submissionId"`
	}
	if err := json.Unmarshal([]byte(out), &accepted); err != nil || accepted.SubmissionID == "" {
		t.Fatalf("submission: %s", out)
	}
	status := ""
	for range 500 {
		resp, err := http.Get("http://" + s.run.addr + "/v1/agents/support/sessions/s2/submissions/" + accepted.SubmissionID)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Status string `json:"status"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if status = st.Status; status != "queued" && status != "running" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status != "completed" {
		t.Fatalf("submission status %q, want completed", status)
	}
	s.wantIncomingTurn(t, "submitMessages")
	for _, h := range s.upstream.all() {
		parentOf(t, h, incomingTraceID)
	}
}

// wantIncomingTurn stops the gateway and fails t unless its one turn span
// is the incoming request's child, entered by entry.
func (s *tracedSetup) wantIncomingTurn(t *testing.T, entry string) {
	t.Helper()
	s.stop(t)
	tree := traceTree{t: t, spans: s.otlp.Spans()}
	turn := tree.one("invoke_agent support")
	if turn.TraceID != incomingTraceID || turn.ParentSpanID != incomingSpanID {
		t.Errorf("%s turn span: trace %s parent %s, want the incoming %s / %s", entry, turn.TraceID, turn.ParentSpanID, incomingTraceID, incomingSpanID)
	}
	wantAttrs(t, turn, map[string]any{"turngate.entry_path": entry})
}

// TestTracingOff checks that without a tracing section no trace context
// is taken from the request or sent upstream or to tools.
func TestTracingOff(t *testing.T) {
	s := startTraced(t, false)
	s.post(t, "/v1/agents/support/chat", incomingParent, chatBody, http.StatusOK)
	s.post(t, "/v1/chat/completions", incomingParent, `{"model":"support","messages":[{"role":"user","content":"Where is order 42?"}]}`, http.StatusOK)
	s.stop(t)
	for _, h := range slices.Concat(s.upstream.all(), s.lookup.all(), s.extension.all()) {
		if h != "" {
			t.Errorf("tracing off, yet an outgoing request carried traceparent %q", h)
		}
	}
	if n, m := len(s.upstream.all()), len(s.extension.all()); n != 4 || m != 2 {
		t.Errorf("upstream saw %d requests and the extension %d, want 4 and 2", n, m)
	}
}

// TestTracingOpenAIEndpoint checks that the OpenAI-compatible endpoint's
// turns continue the caller's trace too.
func TestTracingOpenAIEndpoint(t *testing.T) {
	s := startTraced(t, true)
	s.post(t, "/v1/chat/completions", incomingParent, `{"model":"support","messages":[{"role":"user","content":"Where is order 42?"}]}`, http.StatusOK)
	s.wantIncomingTurn(t, "openai")
	if lookups := s.lookup.all(); len(lookups) != 1 {
		t.Errorf("HTTP tool saw %d requests, want 1", len(lookups))
	} else {
		parentOf(t, lookups[0], incomingTraceID)
	}
}

// TestTracingCollectorDown checks that a collector that cannot be reached
// never fails a turn: the chat is answered, shutdown ends (the last export
// is bounded) and the export failures are logged as the gateway's logs.
func TestTracingCollectorDown(t *testing.T) {
	r := startServe(t, writeServeConfig(t, "tracing: {enabled: true, endpoint: \"http://127.0.0.1:1\"}\n"))
	if status, data := chatWeather(t, r.addr); status != http.StatusOK || !strings.Contains(data, `"tool-output-available"`) {
		t.Fatalf("chat with the collector down: %d %s", status, data)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	for line := range strings.Lines(r.stderr.String()) {
		if !strings.HasPrefix(line, "time=") {
			t.Errorf("stderr line not logged by the gateway's logger: %q", line)
		}
	}
	if !strings.Contains(r.stderr.String(), "tracing: export failed") {
		t.Errorf("no export failure logged:\n%s", r.stderr)
	}
}
