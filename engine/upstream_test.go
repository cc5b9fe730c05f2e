package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/anthropic"
	"github.com/turngate/turngate/engine/provider/openai"
	"github.com/turngate/turngate/internal/golden"
)

// These tests run the engine against the real HTTP providers and an
// in-process model API (the edge of the world), so what they assert is
// what an operator would see on the wire.

// reply is one response of the upstream server.
type reply struct {
	status int
	header map[string]string
	// sse names a file in testdata/upstream streamed as the body, event
	// by event; body is a literal body (error responses).
	sse, body string
	// events, if not zero, streams only the first events of sse.
	events int
	// hold keeps the connection open after the body until the client
	// leaves, then closes upstream.left.
	hold bool
}

// upstream is an in-process model API. It answers the n-th request with
// the n-th reply (the last one repeats) and records every request.
type upstream struct {
	*httptest.Server
	t       testing.TB
	replies []reply
	left    chan struct{} // closed when a client leaves a held stream

	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
}

func newUpstream(t testing.TB, replies ...reply) *upstream {
	t.Helper()
	u := &upstream{t: t, replies: replies, left: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	n := len(u.bodies)
	u.bodies = append(u.bodies, body)
	u.headers = append(u.headers, r.Header.Clone())
	u.mu.Unlock()
	rep := u.replies[min(n, len(u.replies)-1)]
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	if rep.sse != "" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	w.WriteHeader(status)
	if rep.body != "" {
		w.Write([]byte(rep.body))
	}
	if rep.sse != "" {
		raw, err := os.ReadFile(filepath.Join("testdata", "upstream", rep.sse))
		if err != nil {
			u.t.Errorf("reading fixture: %v", err)
			return
		}
		events := strings.SplitAfter(string(raw), "\n\n")
		if rep.events > 0 {
			events = events[:rep.events]
		}
		for _, ev := range events {
			w.Write([]byte(ev))
			w.(http.Flusher).Flush()
		}
	}
	if rep.hold {
		<-r.Context().Done()
		close(u.left)
	}
}

func (u *upstream) requests() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.bodies)
}

// body returns the n-th request body, decoded.
func (u *upstream) body(n int) map[string]any {
	u.t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	var v map[string]any
	if err := json.Unmarshal(u.bodies[n], &v); err != nil {
		u.t.Fatalf("request %d body is not JSON: %v", n, err)
	}
	return v
}

// openaiHarness runs turns of model "gpt" through the openai provider
// against srv.
func openaiHarness(t *testing.T, srv *upstream, base time.Duration, tools ...engine.Tool) *harness {
	h := newHarness(t, nil, tools...)
	p := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test"})
	h.eng = engine.New(engine.Options{Models: models{"gpt": p}, RetryBaseDelay: base, Logger: quiet})
	h.req.Model = "gpt"
	return h
}

// noHang bounds a test turn that would hang if the engine misbehaved (a
// backoff ignoring Retry-After): it then ends aborted and the assertions
// fail, instead of the test binary timing out. It is not a timing
// assertion: a correct engine never comes near it.
func noHang(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestOpenAIInvalidToolArguments replays a stream whose first tool call
// has arguments that are not JSON. The call must become a tool-input error
// the model sees in the next request; the valid call beside it runs.
func TestOpenAIInvalidToolArguments(t *testing.T) {
	srv := newUpstream(t, reply{sse: "openai_bad_args.sse"}, reply{sse: "openai_answer.sse"})
	var runs atomic.Int32
	search := echoTool("search")
	search.InputSchema = json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)
	search.Executor = engine.ExecutorFunc(func(_ context.Context, c engine.ToolExecution) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`{"results":["iter.Seq"]}`), nil
	})
	h := openaiHarness(t, srv, time.Millisecond, search)
	var chunkErrs []error
	h.rec.onChunk = func(c *engine.ChunkContext) {
		if _, err := json.Marshal(c); err != nil {
			chunkErrs = append(chunkErrs, err)
		}
	}
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted || len(res.Steps) != 2 {
		t.Fatalf("status %s, %d steps, error %q", res.Status, len(res.Steps), res.Error)
	}
	if runs.Load() != 1 {
		t.Errorf("search ran %d times, want once (the valid call only)", runs.Load())
	}
	if len(chunkErrs) > 0 {
		t.Errorf("onChunk saw parts that do not serialise: %v", chunkErrs)
	}
	if _, err := json.Marshal(res); err != nil {
		t.Errorf("turn result does not serialise: %v", err)
	}
	// What the model saw: its broken call and the error, in the second request.
	msgs := srv.body(1)["messages"].([]any)
	var toolMsgs []map[string]any
	for _, m := range msgs {
		if m := m.(map[string]any); m["role"] == "tool" {
			toolMsgs = append(toolMsgs, m)
		}
	}
	want := []string{`Invalid input for tool "search": the input is not valid JSON.`, `{"results":["iter.Seq"]}`}
	if len(toolMsgs) != 2 || toolMsgs[0]["content"] != want[0] || toolMsgs[1]["content"] != want[1] {
		t.Errorf("tool messages sent to the model %v, want contents %q", toolMsgs, want)
	}
	if got := h.ev.text(); !strings.Contains(got, `{"type":"tool-input-error","toolCallId":"call_7","toolName":"search","input":"{\"query\": \"go iter","errorText":"Invalid input for tool \"search\": the input is not valid JSON."}`) {
		t.Errorf("no tool-input-error event for call_7:\n%s", got)
	}
	if rc := h.rec.after[0]; rc.Decision != engine.DecisionError || rc.Executed || rc.Success {
		t.Errorf("afterToolCall call_7: %+v", rc)
	}
	if len(h.rec.calls) != 1 || h.rec.calls[0].ToolCallID != "call_8" {
		t.Errorf("beforeToolCall consulted for %+v; want call_8 only", h.rec.calls)
	}
	if u := res.Usage; u.InputTokens != 70 || u.CachedInputTokens != 32 || u.TotalTokens != 96 {
		t.Errorf("usage %+v", u)
	}
}

// TestOpenAIRetries runs the retry rules against the real provider: what
// is retried is decided by the HTTP status, the error body and whether a
// chunk was already streamed.
func TestOpenAIRetries(t *testing.T) {
	e500 := reply{status: 500, header: map[string]string{"Content-Type": "text/plain"}, body: "upstream connect error or disconnect/reset before headers"}
	e503 := reply{status: 503, header: map[string]string{"Content-Type": "application/json"}, body: `{"error":{"message":"The engine is currently overloaded","type":"server_error"}}`}
	e429 := reply{status: 429, header: map[string]string{"Content-Type": "application/json", "Retry-After-Ms": "1"},
		body: `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`}
	e429long := reply{status: 429, header: map[string]string{"Retry-After": "3600"}, body: `{"error":{"message":"quota"}}`}
	e400 := reply{status: 400, header: map[string]string{"Content-Type": "application/json"},
		body: `{"error":{"message":"Invalid value for 'temperature' (secret detail)","type":"invalid_request_error"}}`}
	ok := reply{sse: "openai_answer.sse"}
	tests := []struct {
		name       string
		replies    []reply
		base       time.Duration
		maxRetries *int
		status     string
		requests   int
		text       string // the final message's text
	}{
		{name: "500 and 429 retried", replies: []reply{e500, e429, ok}, status: engine.StatusCompleted, requests: 3, text: "It is sunny in Paris."},
		// With a one-hour backoff only Retry-After-Ms lets the turn finish.
		{name: "Retry-After honoured", replies: []reply{e429, ok}, base: time.Hour, status: engine.StatusCompleted, requests: 2, text: "It is sunny in Paris."},
		{name: "default maxRetries is 2", replies: []reply{e503, e503, e503, ok}, status: engine.StatusError, requests: 3},
		{name: "maxRetries 1", replies: []reply{e503, e503, ok}, maxRetries: ptr(1), status: engine.StatusError, requests: 2},
		{name: "maxRetries 0", replies: []reply{e503, ok}, maxRetries: ptr(0), status: engine.StatusError, requests: 1},
		{name: "400 not retried", replies: []reply{e400, ok}, status: engine.StatusError, requests: 1},
		{name: "Retry-After beyond a minute gives up", replies: []reply{e429long, ok}, status: engine.StatusError, requests: 1},
		{name: "in-stream error before the first chunk retried", replies: []reply{{sse: "openai_error_first.sse"}, ok}, status: engine.StatusCompleted, requests: 2, text: "It is sunny in Paris."},
		{name: "error after the first chunk not retried", replies: []reply{{sse: "openai_error_after_chunk.sse"}, ok}, status: engine.StatusError, requests: 1, text: "Thinking"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newUpstream(t, tt.replies...)
			base := tt.base
			if base == 0 {
				base = time.Millisecond
			}
			h := openaiHarness(t, srv, base)
			h.req.Defaults.MaxRetries = tt.maxRetries
			res := h.run(noHang(t))
			if res.Status != tt.status || srv.requests() != tt.requests {
				t.Fatalf("status %s after %d requests (error %q); want %s after %d", res.Status, srv.requests(), res.Error, tt.status, tt.requests)
			}
			var text string
			for _, p := range res.Message.Parts {
				text += p.Text
			}
			if text != tt.text {
				t.Errorf("message text %q, want %q", text, tt.text)
			}
			if res.Status != engine.StatusError {
				return
			}
			if res.Error != "An error occurred." || strings.Contains(h.ev.text(), "secret") {
				t.Errorf("provider error leaked: result %q, stream %s", res.Error, h.ev.text())
			}
			var ue *engine.UpstreamError
			if len(h.rec.errs) != 1 || h.rec.errs[0].Stage != engine.StageStream || !errors.As(h.rec.errs[0].Err, &ue) {
				t.Errorf("onChatError %+v, want one stream-stage UpstreamError", h.rec.errs)
			} else if got, want := h.rec.errs[0].Class, engine.ClassifyError(engine.StageStream, ue); got != want || got == engine.ClassUnknown {
				t.Errorf("onChatError class %q, want %q", got, want)
			}
		})
	}
}

// TestOpenAIAbortClosesUpstream cancels a turn mid-stream: the turn ends
// aborted with the partial text, and the upstream connection is closed
// (the server sees the client leave).
func TestOpenAIAbortClosesUpstream(t *testing.T) {
	// One chunk, then the server holds the stream open.
	srv := newUpstream(t, reply{sse: "openai_error_after_chunk.sse", events: 1, hold: true})
	h := openaiHarness(t, srv, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.rec.onChunk = func(c *engine.ChunkContext) {
		if c.Chunk.Type == engine.StreamTextDelta {
			cancel()
		}
	}
	res := h.run(ctx)
	<-srv.left // blocks until the engine closed the upstream connection
	if res.Status != engine.StatusAborted || res.FinishReason != engine.FinishInterrupted {
		t.Fatalf("status %s finish %s", res.Status, res.FinishReason)
	}
	if p := res.Message.Parts; len(p) != 2 || p[1].Text != "Thinking" {
		t.Errorf("partial message %+v", p)
	}
	if types := h.ev.types(); types[len(types)-1] != engine.EventAbort {
		t.Errorf("events %q", types)
	}
}

// TestTurnConfigReachesProviderBody sets every TurnConfig field (and the
// StepConfig fields) through the hooks and compares the exact request body
// each real provider sends with a golden file. Fields a provider's API does
// not have are reported as warnings in the step (openai: topK; anthropic:
// penalties and seed). maxSteps, stopWhen, maxRetries and timeout act in
// the engine and have their own tests.
func TestTurnConfigReachesProviderBody(t *testing.T) {
	tests := []struct {
		name     string
		sse      string
		provider func(url string) engine.Provider
		options  map[string]any // the provider's providerOptions section
		warnings []string
	}{
		{name: "openai", sse: "openai_answer.sse", provider: func(url string) engine.Provider {
			return openai.New(openai.Config{BaseURL: url + "/v1", APIKey: "sk-test"})
		}, options: map[string]any{"user": "tenant-1", "reasoning_effort": "low"},
			warnings: []string{"topK is not part of the Chat Completions API and was not sent; set it in providerOptions.openai for servers that accept top_k"}},
		{name: "anthropic", sse: "anthropic_answer.sse", provider: func(url string) engine.Provider {
			return anthropic.New(anthropic.Config{BaseURL: url, APIKey: "sk-ant"})
		}, options: map[string]any{"metadata": map[string]any{"user_id": "tenant-1"}},
			warnings: []string{
				"frequencyPenalty is not supported by the Anthropic Messages API and was not sent",
				"presencePenalty is not supported by the Anthropic Messages API and was not sent",
				"seed is not supported by the Anthropic Messages API and was not sent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newUpstream(t, reply{sse: tt.sse})
			h := newHarness(t, nil, echoTool("lookup"), echoTool("delete"))
			h.eng = engine.New(engine.Options{Models: models{"agent-model": newFake(), "turn-model": tt.provider(srv.URL)}, Logger: quiet})
			h.req.Model = "agent-model"
			h.req.Defaults = engine.TurnConfig{Temperature: ptr(0.9), Headers: map[string]string{"X-Agent": "a"}}
			extra := echoTool("summarise")
			extra.Description = "Summarise a text"
			h.rec.turn = func(*engine.TurnContext) (*engine.TurnConfig, error) {
				return &engine.TurnConfig{
					Model:    ptr("turn-model"),
					System:   ptr("You are terse."),
					Messages: &[]engine.ModelMessage{{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentText, Text: "Weather in Paris?"}}}},
					Tools:    []engine.Tool{extra},
					// delete is never offered.
					ActiveTools:      &[]string{"lookup", "summarise"},
					ToolChoice:       &engine.ToolChoice{Type: engine.ToolChoiceRequired},
					SendReasoning:    ptr(false),
					MaxOutputTokens:  ptr(300),
					Temperature:      ptr(0.2),
					TopP:             ptr(0.8),
					TopK:             ptr(20),
					PresencePenalty:  ptr(0.1),
					FrequencyPenalty: ptr(0.4),
					StopSequences:    &[]string{"END", "STOP"},
					Seed:             ptr(int64(42)),
					Headers:          map[string]string{"X-Turn": "t"},
					ProviderOptions:  map[string]any{tt.name: tt.options, "other": map[string]any{"ignored": true}},
					Output:           &engine.OutputSpec{Name: "weather", Schema: json.RawMessage(`{"type":"object","properties":{"sky":{"type":"string"}}}`)},
				}, nil
			}
			// The step overrides the system prompt only, so the turn's
			// toolChoice shows; TestTurnConfigReachesRequest covers the
			// other StepConfig fields.
			h.rec.stepCfg = func(*engine.PrepareStepContext) (*engine.StepConfig, error) {
				return &engine.StepConfig{System: ptr("You are terse. Step zero.")}, nil
			}
			res := h.run(context.Background())
			// The answer is not JSON, so structured output fails; the
			// request is what this test is about.
			if srv.requests() != 1 || len(res.Steps) != 1 {
				t.Fatalf("%d requests, %d steps, status %s %q", srv.requests(), len(res.Steps), res.Status, res.Error)
			}
			srv.mu.Lock()
			body, header := srv.bodies[0], srv.headers[0]
			srv.mu.Unlock()
			golden.CheckJSON(t, filepath.Join("testdata", "requests", tt.name+".json"), body)
			if header.Get("X-Agent") != "a" || header.Get("X-Turn") != "t" {
				t.Errorf("headers %v", header)
			}
			if got := res.Steps[0].Warnings; strings.Join(got, "\n") != strings.Join(tt.warnings, "\n") {
				t.Errorf("warnings %q, want %q", got, tt.warnings)
			}
			if res.Steps[0].Model != "turn-model" {
				t.Errorf("step model %q", res.Steps[0].Model)
			}
		})
	}
}
