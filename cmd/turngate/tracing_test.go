package main

import (
	"encoding/hex"
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

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// The trace context a traced test request comes with.
const (
	incomingTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	incomingSpanID  = "00f067aa0ba902b7"
	incomingParent  = "00-" + incomingTraceID + "-" + incomingSpanID + "-01"
)

// span is one span an otlpReceiver received, flattened.
type span struct {
	name, traceID, spanID, parentID string
	attrs                           map[string]any
	events                          []spanEvent
	service                         string
}

type spanEvent struct {
	name  string
	attrs map[string]any
}

// otlpReceiver is an in-process OTLP/HTTP collector: it decodes the
// protobuf export requests posted to /v1/traces.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []span
	auth  []string // the authorization header of each export
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected export "+req.URL.Path+" "+req.Header.Get("Content-Type"), http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var export collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &export); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		for _, rs := range export.ResourceSpans {
			service := attrMap(rs.GetResource().GetAttributes())["service.name"]
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := span{name: s.Name, traceID: hex.EncodeToString(s.TraceId), spanID: hex.EncodeToString(s.SpanId),
						parentID: hex.EncodeToString(s.ParentSpanId), attrs: attrMap(s.Attributes), service: fmt.Sprint(service)}
					for _, e := range s.Events {
						sp.events = append(sp.events, spanEvent{name: e.Name, attrs: attrMap(e.Attributes)})
					}
					r.spans = append(r.spans, sp)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// received returns the spans received so far.
func (r *otlpReceiver) received() []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// attrMap flattens OTLP attributes: strings, ints, bools, doubles and
// string arrays.
func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = v.DoubleValue
		case *commonpb.AnyValue_ArrayValue:
			var ss []string
			for _, e := range v.ArrayValue.Values {
				ss = append(ss, e.GetStringValue())
			}
			m[kv.Key] = ss
		}
	}
	return m
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
	run              *running
	otlp             *otlpReceiver
	upstream, lookup *headerLog
}

// startTraced serves an agent whose model calls the http tool lookup once,
// then answers (a two-step tool turn), with a Rego rule on tool calls.
func startTraced(t *testing.T, tracing bool) *tracedSetup {
	t.Helper()
	s := &tracedSetup{upstream: &headerLog{}, lookup: &headerLog{}}
	model := fakeOpenAI(t, s.upstream)
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.lookup.add(r.Header.Get("traceparent"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"shipped"}`)
	}))
	t.Cleanup(tool.Close)
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules")
	if err := os.Mkdir(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	rego := "package turngate.tool_call\n\nblock contains \"no deletes\" if input.tool.name == \"delete\"\n"
	if err := os.WriteFile(filepath.Join(rules, "tools.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
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
`
	if tracing {
		s.otlp = newOTLPReceiver(t)
		cfg += `tracing: {enabled: true, endpoint: "` + s.otlp.URL + `", serviceName: turngate-test, headers: {Authorization: "Bearer collector-token"}}
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
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr traceTree) children(parent span) []span {
	var out []span
	for _, s := range tr.spans {
		if s.parentID == parent.spanID && s.traceID == parent.traceID {
			out = append(out, s)
		}
	}
	return out
}

func (tr traceTree) names() []string {
	var out []string
	for _, s := range tr.spans {
		out = append(out, s.name)
	}
	return out
}

// wantAttrs fails unless s has each attribute of want.
func wantAttrs(t *testing.T, s span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.attrs[k]; !ok || fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("span %q: attribute %s = %v (present %v), want %v", s.name, k, got, ok, v)
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
	tree := traceTree{t: t, spans: s.otlp.received()}

	turn := tree.one("invoke_agent support")
	if turn.traceID != incomingTraceID || turn.parentID != incomingSpanID {
		t.Fatalf("turn span: trace %s parent %s, want the incoming %s / %s", turn.traceID, turn.parentID, incomingTraceID, incomingSpanID)
	}
	if turn.service != "turngate-test" {
		t.Errorf("service.name = %q, want turngate-test", turn.service)
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
		if step.parentID != turn.spanID || step.traceID != incomingTraceID {
			t.Errorf("step span %v: not a child of the turn span", step.attrs)
		}
		n := step.attrs["turngate.step.number"].(int64)
		kids := tree.children(step)
		var names []string
		for _, k := range kids {
			names = append(names, k.name)
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
			if k.name == "chat gpt-test" {
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
	for _, e := range tool.events {
		if e.name != "turngate.policy.decision" {
			continue
		}
		hooks = append(hooks, fmt.Sprint(e.attrs["turngate.policy.hook"]))
		if rev, _ := e.attrs["turngate.policy.revision"].(string); !strings.HasPrefix(rev, "sha256:") {
			t.Errorf("decision event %v: no rule revision", e.attrs)
		}
		if e.attrs["turngate.policy.hook"] == "beforeToolCall" && e.attrs["turngate.policy.outcome"] != "no_match" {
			t.Errorf("beforeToolCall decision event %v: want outcome no_match", e.attrs)
		}
	}
	if !slices.Equal(hooks, []string{"beforeToolCall", "toolResult"}) {
		t.Errorf("tool span decision events for hooks %v, want beforeToolCall, toolResult", hooks)
	}
	for _, sp := range tree.spans {
		for k, v := range sp.attrs {
			if str, ok := v.(string); ok && (strings.Contains(str, "order 42") || strings.Contains(str, "shipped")) {
				t.Errorf("span %q attribute %s carries message content: %q", sp.name, k, str)
			}
		}
	}

	// The upstream model got the trace context of each chat span, the
	// HTTP tool that of its execute_tool span.
	ups := s.upstream.all()
	if len(ups) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(ups))
	}
	chatIDs := []string{chats[0].spanID, chats[1].spanID}
	for _, h := range ups {
		if p := parentOf(t, h, incomingTraceID); !slices.Contains(chatIDs, p) {
			t.Errorf("upstream traceparent %q: parent %s is not a chat span %v", h, p, chatIDs)
		}
	}
	lookups := s.lookup.all()
	if len(lookups) != 1 || parentOf(t, lookups[0], incomingTraceID) != tool.spanID {
		t.Errorf("HTTP tool traceparents %v, want one with the tool span %s as parent", lookups, tool.spanID)
	}
	s.otlp.mu.Lock()
	defer s.otlp.mu.Unlock()
	if len(s.otlp.auth) == 0 || s.otlp.auth[0] != "Bearer collector-token" {
		t.Errorf("exports' Authorization headers %v, want the configured one", s.otlp.auth)
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
			tree := traceTree{t: t, spans: s.otlp.received()}
			turn := tree.one("invoke_agent support")
			if turn.parentID != "" || turn.traceID == incomingTraceID || turn.traceID == strings.Repeat("0", 32) {
				t.Errorf("turn span: trace %s parent %q, want a new root trace", turn.traceID, turn.parentID)
			}
			for _, h := range s.upstream.all() {
				parentOf(t, h, turn.traceID)
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
	s.stop(t)
	tree := traceTree{t: t, spans: s.otlp.received()}
	turn := tree.one("invoke_agent support")
	if turn.traceID != incomingTraceID || turn.parentID != incomingSpanID {
		t.Errorf("submission turn span: trace %s parent %s, want the submitting request's", turn.traceID, turn.parentID)
	}
	wantAttrs(t, turn, map[string]any{"turngate.entry_path": "submitMessages"})
	for _, h := range s.upstream.all() {
		parentOf(t, h, incomingTraceID)
	}
}

// TestTracingOff checks that without a tracing section no trace context
// is taken from the request or sent upstream or to tools.
func TestTracingOff(t *testing.T) {
	s := startTraced(t, false)
	s.post(t, "/v1/agents/support/chat", incomingParent, chatBody, http.StatusOK)
	s.post(t, "/v1/chat/completions", incomingParent, `{"model":"support","messages":[{"role":"user","content":"Where is order 42?"}]}`, http.StatusOK)
	s.stop(t)
	for _, h := range append(s.upstream.all(), s.lookup.all()...) {
		if h != "" {
			t.Errorf("tracing off, yet an outgoing request carried traceparent %q", h)
		}
	}
	if n := len(s.upstream.all()); n != 4 {
		t.Errorf("upstream saw %d requests, want 4", n)
	}
}

// TestTracingOpenAIEndpoint checks that the OpenAI-compatible endpoint's
// turns continue the caller's trace too.
func TestTracingOpenAIEndpoint(t *testing.T) {
	s := startTraced(t, true)
	s.post(t, "/v1/chat/completions", incomingParent, `{"model":"support","messages":[{"role":"user","content":"Where is order 42?"}]}`, http.StatusOK)
	s.stop(t)
	tree := traceTree{t: t, spans: s.otlp.received()}
	turn := tree.one("invoke_agent support")
	if turn.traceID != incomingTraceID || turn.parentID != incomingSpanID {
		t.Errorf("OpenAI endpoint turn span: trace %s parent %s, want the incoming one", turn.traceID, turn.parentID)
	}
	wantAttrs(t, turn, map[string]any{"turngate.entry_path": "openai"})
	if lookups := s.lookup.all(); len(lookups) != 1 {
		t.Errorf("HTTP tool saw %d requests, want 1", len(lookups))
	} else {
		parentOf(t, lookups[0], incomingTraceID)
	}
}
