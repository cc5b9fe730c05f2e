package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
)

// script is one scripted model step of fakeProvider.
type script struct {
	// err is returned by Provider.Stream, before any part.
	err error
	// parts are streamed in order.
	parts []engine.StreamPart
	// failAfter is the stream error after the parts.
	failAfter error
	// hang blocks after the parts until the stream's context ends.
	hang bool
}

// fakeProvider replays one script per model request and records each
// request. It is the edge of the world: the upstream model.
type fakeProvider struct {
	mu      sync.Mutex
	scripts []script
	reqs    []*engine.ModelRequest
}

func newFake(scripts ...script) *fakeProvider { return &fakeProvider{scripts: scripts} }

func (f *fakeProvider) Stream(ctx context.Context, req *engine.ModelRequest) (engine.Stream, error) {
	f.mu.Lock()
	i := len(f.reqs)
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if i >= len(f.scripts) {
		return nil, fmt.Errorf("fake: no script for request %d", i)
	}
	s := f.scripts[i]
	if s.err != nil {
		return nil, s.err
	}
	return &fakeStream{ctx: ctx, s: s, i: -1}, nil
}

func (f *fakeProvider) requests() []*engine.ModelRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

type fakeStream struct {
	ctx    context.Context
	s      script
	i      int
	err    error
	closed bool
}

func (s *fakeStream) Next() bool {
	if s.err != nil || s.closed {
		return false
	}
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return false
	}
	s.i++
	if s.i < len(s.s.parts) {
		return true
	}
	if s.s.hang {
		<-s.ctx.Done()
		s.err = s.ctx.Err()
		return false
	}
	s.err = s.s.failAfter
	return false
}

func (s *fakeStream) Current() engine.StreamPart { return s.s.parts[s.i] }
func (s *fakeStream) Err() error                 { return s.err }
func (s *fakeStream) Close() error               { s.closed = true; return nil }

// models resolves a model name to its fake provider.
type models map[string]engine.Provider

func (m models) Resolve(name string) (engine.Provider, string, error) {
	p, ok := m[name]
	if !ok {
		return nil, "", fmt.Errorf("unknown model %q", name)
	}
	return p, "up-" + name, nil
}

// Stream part builders.

func textParts(id string, deltas ...string) []engine.StreamPart {
	ps := []engine.StreamPart{{Type: engine.StreamTextStart, ID: id}}
	for _, d := range deltas {
		ps = append(ps, engine.StreamPart{Type: engine.StreamTextDelta, ID: id, Text: d})
	}
	return append(ps, engine.StreamPart{Type: engine.StreamTextEnd, ID: id})
}

func callParts(id, name, input string) []engine.StreamPart {
	return []engine.StreamPart{
		{Type: engine.StreamToolInputStart, ToolCallID: id, ToolName: name},
		{Type: engine.StreamToolInputDelta, ToolCallID: id, Text: input},
		{Type: engine.StreamToolCall, ToolCallID: id, ToolName: name, Input: json.RawMessage(input)},
	}
}

func finish(reason string, in, out int) engine.StreamPart {
	return engine.StreamPart{Type: engine.StreamFinish, FinishReason: reason, Usage: &engine.Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}}
}

// step joins part groups into one script.
func step(groups ...[]engine.StreamPart) script {
	var s script
	for _, g := range groups {
		s.parts = append(s.parts, g...)
	}
	return s
}

func one(p engine.StreamPart) []engine.StreamPart { return []engine.StreamPart{p} }

// textStep is a step that answers with text.
func textStep(text string) script {
	return step(textParts("t", text), one(finish(engine.FinishStop, 10, 5)))
}

// callStep is a step that calls tools, each given as name=input.
func callStep(calls ...string) script {
	var groups [][]engine.StreamPart
	for i, c := range calls {
		name, input, _ := strings.Cut(c, "=")
		groups = append(groups, callParts(fmt.Sprintf("call_%d_%s", i, name), name, input))
	}
	groups = append(groups, one(finish(engine.FinishToolCalls, 10, 5)))
	return step(groups...)
}

// recorder records the hook sequence and lets a test steer decisions.
type recorder struct {
	mu    sync.Mutex
	log   []string
	calls []engine.ToolCallContext
	after []engine.ToolCallResultContext
	steps []engine.StepResult
	resp  []engine.ChatResponseResult
	errs  []engine.ChatErrorContext

	turn       func(*engine.TurnContext) (*engine.TurnConfig, error)
	stepCfg    func(*engine.PrepareStepContext) (*engine.StepConfig, error)
	decide     func(*engine.ToolCallContext) (*engine.ToolCallDecision, error)
	result     func(*engine.ToolCallResultContext) (*engine.ToolResultDecision, error)
	chatErr    func(*engine.ChatErrorContext) error
	onChunk    func(*engine.ChunkContext)
	panicOnObs bool
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, s)
}

func (r *recorder) BeforeTurn(_ context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	r.add("beforeTurn")
	if r.turn != nil {
		return r.turn(tc)
	}
	return nil, nil
}

func (r *recorder) BeforeStep(_ context.Context, sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
	r.add(fmt.Sprintf("beforeStep %d", sc.StepNumber))
	if r.stepCfg != nil {
		return r.stepCfg(sc)
	}
	return nil, nil
}

func (r *recorder) BeforeToolCall(_ context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	r.add("beforeToolCall " + tc.ToolName)
	r.mu.Lock()
	r.calls = append(r.calls, *tc)
	r.mu.Unlock()
	if r.decide != nil {
		return r.decide(tc)
	}
	return nil, nil
}

func (r *recorder) ToolResult(_ context.Context, rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
	if r.result != nil {
		return r.result(rc)
	}
	return nil, nil
}

func (r *recorder) AfterToolCall(_ context.Context, rc *engine.ToolCallResultContext) {
	r.add("afterToolCall " + rc.ToolName)
	r.mu.Lock()
	r.after = append(r.after, *rc)
	r.mu.Unlock()
	if r.panicOnObs {
		panic("afterToolCall boom")
	}
}

func (r *recorder) OnStepFinish(_ context.Context, s *engine.StepResult) {
	r.add(fmt.Sprintf("onStepFinish %d", s.StepNumber))
	r.mu.Lock()
	r.steps = append(r.steps, *s)
	r.mu.Unlock()
	if r.panicOnObs {
		panic("onStepFinish boom")
	}
}

func (r *recorder) OnChunk(_ context.Context, c *engine.ChunkContext) {
	r.add("onChunk")
	if r.onChunk != nil {
		r.onChunk(c)
	}
	if r.panicOnObs {
		panic("onChunk boom")
	}
}

func (r *recorder) OnChatResponse(_ context.Context, res *engine.ChatResponseResult) {
	r.add("onChatResponse " + res.Status)
	r.mu.Lock()
	r.resp = append(r.resp, *res)
	r.mu.Unlock()
	if r.panicOnObs {
		panic("onChatResponse boom")
	}
}

func (r *recorder) OnChatError(_ context.Context, e *engine.ChatErrorContext) error {
	r.add("onChatError " + e.Stage)
	r.mu.Lock()
	r.errs = append(r.errs, *e)
	r.mu.Unlock()
	if r.chatErr != nil {
		return r.chatErr(e)
	}
	return nil
}

// sequence returns the hook log with runs of onChunk collapsed to "onChunk…".
func (r *recorder) sequence() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.log {
		if s == "onChunk" {
			if len(out) > 0 && out[len(out)-1] == "onChunk…" {
				continue
			}
			s = "onChunk…"
		}
		out = append(out, s)
	}
	return out
}

// events collects the emitted UI stream as JSON lines.
type events struct {
	mu    sync.Mutex
	lines []string
}

func (e *events) emit(ev engine.Event) {
	b, err := ev.MarshalJSON()
	if err != nil {
		panic(err)
	}
	e.mu.Lock()
	e.lines = append(e.lines, string(b))
	e.mu.Unlock()
}

func (e *events) types() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, l := range e.lines {
		var v struct{ Type string }
		_ = json.Unmarshal([]byte(l), &v)
		out = append(out, v.Type)
	}
	return out
}

func (e *events) text() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.lines, "\n")
}

// Tools.

func echoTool(name string) engine.Tool {
	return engine.Tool{
		ToolInfo: engine.ToolInfo{Name: name, Kind: engine.ToolKindBuiltin, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}`)},
		Executor: engine.ExecutorFunc(func(_ context.Context, c engine.ToolExecution) (json.RawMessage, error) {
			return json.RawMessage(fmt.Sprintf(`{"tool":%q,"input":%s}`, c.ToolName, c.Input)), nil
		}),
	}
}

// logged wraps tool's executor so that each execution is recorded in the
// hook sequence as "execute <name>".
func logged(rec *recorder, tool engine.Tool) engine.Tool {
	inner := tool.Executor
	tool.Executor = engine.ExecutorFunc(func(ctx context.Context, c engine.ToolExecution) (json.RawMessage, error) {
		rec.add("execute " + c.ToolName)
		return inner.Execute(ctx, c)
	})
	return tool
}

func userMsg(text string) engine.UIMessage {
	return engine.UIMessage{ID: "u1", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: text}}}
}

// quiet discards engine logs in tests.
var quiet = slog.New(slog.DiscardHandler)

// harness runs one turn against a fake provider.
type harness struct {
	fake *fakeProvider
	rec  *recorder
	ev   *events
	eng  *engine.Engine
	req  *engine.TurnRequest
}

func newHarness(t testing.TB, fake *fakeProvider, tools ...engine.Tool) *harness {
	t.Helper()
	h := &harness{fake: fake, rec: &recorder{}, ev: &events{}}
	h.eng = engine.New(engine.Options{Models: models{"m": fake, "other": fake}, RetryBaseDelay: 1, Logger: quiet})
	h.req = &engine.TurnRequest{
		Identity:  engine.Identity{RequestID: "req1", SessionID: "s1", Agent: "a", EntryPath: engine.EntryChat},
		Model:     "m",
		System:    "be brief",
		Messages:  []engine.UIMessage{userMsg("hi")},
		Tools:     tools,
		MessageID: "msg_assistant_1",
		Hooks:     h.rec,
		Emit:      h.ev.emit,
	}
	return h
}

func (h *harness) run(ctx context.Context) *engine.TurnResult {
	return h.eng.Run(ctx, h.req)
}
