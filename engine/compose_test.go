package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/turngate/turngate/engine"
)

// hookFuncs is a Hooks whose decision hooks are functions.
type hookFuncs struct {
	engine.NopHooks
	name   string
	log    *[]string
	turn   func(*engine.TurnContext) (*engine.TurnConfig, error)
	step   func(*engine.PrepareStepContext) (*engine.StepConfig, error)
	tool   func(*engine.ToolCallContext) (*engine.ToolCallDecision, error)
	result func(*engine.ToolCallResultContext) (*engine.ToolResultDecision, error)
	err    func(*engine.ChatErrorContext) error
	panics bool
}

func (h hookFuncs) BeforeTurn(_ context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	if h.turn == nil {
		return nil, nil
	}
	return h.turn(tc)
}

func (h hookFuncs) BeforeStep(_ context.Context, sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
	if h.step == nil {
		return nil, nil
	}
	return h.step(sc)
}

func (h hookFuncs) BeforeToolCall(_ context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	*h.log = append(*h.log, h.name+" saw "+string(tc.Input))
	if h.tool == nil {
		return nil, nil
	}
	return h.tool(tc)
}

func (h hookFuncs) ToolResult(_ context.Context, rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
	if h.result == nil {
		return nil, nil
	}
	return h.result(rc)
}

func (h hookFuncs) OnStepFinish(context.Context, *engine.StepResult) {
	*h.log = append(*h.log, h.name+" onStepFinish")
	if h.panics {
		panic(h.name)
	}
}

func (h hookFuncs) OnChatError(_ context.Context, e *engine.ChatErrorContext) error {
	*h.log = append(*h.log, h.name+" onChatError "+e.Message)
	if h.err == nil {
		return nil
	}
	return h.err(e)
}

func TestComposeBeforeTurnMerges(t *testing.T) {
	var log []string
	first := hookFuncs{name: "first", log: &log, turn: func(*engine.TurnContext) (*engine.TurnConfig, error) {
		return &engine.TurnConfig{
			Model: ptr("a"), System: ptr("s1"), Tools: []engine.Tool{echoTool("X")},
			StopWhen: []engine.StopCondition{{Type: engine.StopStepCount, Count: 3}},
			Headers:  map[string]string{"a": "1", "c": "first"}, ProviderOptions: map[string]any{"p": 1},
		}, nil
	}}
	second := hookFuncs{name: "second", log: &log, turn: func(tc *engine.TurnContext) (*engine.TurnConfig, error) {
		if tc.Model != "a" || tc.System != "s1" {
			t.Errorf("second hook sees model %q system %q", tc.Model, tc.System)
		}
		return &engine.TurnConfig{
			Model: ptr("b"), Tools: []engine.Tool{echoTool("Y")},
			StopWhen: []engine.StopCondition{{Type: engine.StopHasToolCall, ToolName: "Y"}},
			Headers:  map[string]string{"b": "2", "c": "second"},
		}, nil
	}}
	cfg, err := engine.Compose(first, nil, second).BeforeTurn(context.Background(), &engine.TurnContext{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Model != "b" || *cfg.System != "s1" || len(cfg.Tools) != 2 || len(cfg.StopWhen) != 2 {
		t.Errorf("merged %+v", cfg)
	}
	if !reflect.DeepEqual(cfg.Headers, map[string]string{"a": "1", "b": "2", "c": "second"}) || cfg.ProviderOptions["p"] != 1 {
		t.Errorf("headers %v providerOptions %v", cfg.Headers, cfg.ProviderOptions)
	}
	failing := hookFuncs{name: "f", log: &log, turn: func(*engine.TurnContext) (*engine.TurnConfig, error) { return nil, errors.New("nope") }}
	if _, err := engine.Compose(failing, first).BeforeTurn(context.Background(), &engine.TurnContext{}); err == nil {
		t.Error("error not returned")
	}
}

func TestComposeBeforeStep(t *testing.T) {
	var log []string
	a := hookFuncs{name: "a", log: &log, step: func(*engine.PrepareStepContext) (*engine.StepConfig, error) {
		return &engine.StepConfig{ActiveTools: &[]string{"x"}, ProviderOptions: map[string]any{"a": 1}}, nil
	}}
	b := hookFuncs{name: "b", log: &log, step: func(sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
		if !slices.Equal(sc.ActiveTools, []string{"x"}) {
			t.Errorf("b sees active tools %v", sc.ActiveTools)
		}
		return &engine.StepConfig{ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceNone}, ProviderOptions: map[string]any{"b": 2}}, nil
	}}
	cfg, err := engine.Compose(a, b).BeforeStep(context.Background(), &engine.PrepareStepContext{})
	if err != nil || len(*cfg.ActiveTools) != 1 || cfg.ToolChoice.Type != engine.ToolChoiceNone || len(cfg.ProviderOptions) != 2 {
		t.Errorf("merged %+v, %v", cfg, err)
	}
}

func TestComposeBeforeToolCall(t *testing.T) {
	rewrite := func(in string) func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) {
		return func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) {
			return &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(in)}, nil
		}
	}
	block := func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) {
		return &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "no"}, nil
	}
	tests := []struct {
		name  string
		hooks []func(*engine.ToolCallContext) (*engine.ToolCallDecision, error)
		want  *engine.ToolCallDecision
		log   []string
		err   bool
	}{
		{name: "all allow", hooks: []func(*engine.ToolCallContext) (*engine.ToolCallDecision, error){nil, nil},
			log: []string{`h0 saw {"q":1}`, `h1 saw {"q":1}`}},
		{name: "rewrite seen by later hooks", hooks: []func(*engine.ToolCallContext) (*engine.ToolCallDecision, error){rewrite(`{"q":2}`), nil, rewrite(`{"q":3}`)},
			want: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"q":3}`)},
			log:  []string{`h0 saw {"q":1}`, `h1 saw {"q":2}`, `h2 saw {"q":2}`}},
		{name: "first block wins", hooks: []func(*engine.ToolCallContext) (*engine.ToolCallDecision, error){rewrite(`{"q":2}`), block, rewrite(`{"q":3}`)},
			want: &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "no"},
			log:  []string{`h0 saw {"q":1}`, `h1 saw {"q":2}`}},
		{name: "error stops", hooks: []func(*engine.ToolCallContext) (*engine.ToolCallDecision, error){
			func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) { return nil, errors.New("x") }, block},
			err: true, log: []string{`h0 saw {"q":1}`}},
		{name: "panic is an error", hooks: []func(*engine.ToolCallContext) (*engine.ToolCallDecision, error){
			func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) { panic("x") }, nil},
			err: true, log: []string{`h0 saw {"q":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log []string
			var hs []engine.Hooks
			for i, f := range tt.hooks {
				hs = append(hs, hookFuncs{name: "h" + string(rune('0'+i)), log: &log, tool: f})
			}
			d, err := engine.Compose(hs...).BeforeToolCall(context.Background(), &engine.ToolCallContext{Input: json.RawMessage(`{"q":1}`)})
			if (err != nil) != tt.err || !reflect.DeepEqual(d, tt.want) || !slices.Equal(log, tt.log) {
				t.Errorf("decision %+v err %v log %q; want %+v err %v log %q", d, err, log, tt.want, tt.err, tt.log)
			}
		})
	}
}

func TestComposeChainsAndObservers(t *testing.T) {
	var log []string
	a := hookFuncs{name: "a", log: &log, panics: true,
		result: func(rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
			return &engine.ToolResultDecision{Output: json.RawMessage(`"a:` + string(rc.Output[1:]))}, nil
		},
		err: func(*engine.ChatErrorContext) error { return errors.New("from a") }}
	b := hookFuncs{name: "b", log: &log,
		result: func(rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
			return &engine.ToolResultDecision{Output: json.RawMessage(`"b:` + string(rc.Output[1:]))}, nil
		}}
	h := engine.Compose(a, b)
	d, err := h.ToolResult(context.Background(), &engine.ToolCallResultContext{Output: json.RawMessage(`"x"`)})
	if err != nil || string(d.Output) != `"b:a:x"` {
		t.Errorf("chained output %s, %v", d.Output, err)
	}
	h.OnStepFinish(context.Background(), &engine.StepResult{})
	got := h.OnChatError(context.Background(), &engine.ChatErrorContext{Message: "raw"})
	if got == nil || got.Error() != "from a" {
		t.Errorf("onChatError result %v", got)
	}
	want := []string{"a onStepFinish", "b onStepFinish", "a onChatError raw", "b onChatError from a"}
	if !slices.Equal(log, want) {
		t.Errorf("log %q, want %q", log, want)
	}
}

// panicHooks panics in every hook.
type panicHooks struct{}

func (panicHooks) BeforeTurn(context.Context, *engine.TurnContext) (*engine.TurnConfig, error) {
	panic("beforeTurn")
}
func (panicHooks) BeforeStep(context.Context, *engine.PrepareStepContext) (*engine.StepConfig, error) {
	panic("beforeStep")
}
func (panicHooks) BeforeToolCall(context.Context, *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	panic("beforeToolCall")
}
func (panicHooks) ToolResult(context.Context, *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
	panic("toolResult")
}
func (panicHooks) AfterToolCall(context.Context, *engine.ToolCallResultContext) {
	panic("afterToolCall")
}
func (panicHooks) OnStepFinish(context.Context, *engine.StepResult) { panic("onStepFinish") }
func (panicHooks) OnChunk(context.Context, *engine.ChunkContext)    { panic("onChunk") }
func (panicHooks) OnChatResponse(context.Context, *engine.ChatResponseResult) {
	panic("onChatResponse")
}
func (panicHooks) OnChatError(context.Context, *engine.ChatErrorContext) error { panic("onChatError") }

// TestComposeNeverLetsAPanicEscape calls every hook of a composition whose
// first member panics everywhere: decision hooks return the panic as an
// error (fail closed), observation hooks and onChatError go on to the
// next member.
func TestComposeNeverLetsAPanicEscape(t *testing.T) {
	rec := &recorder{chatErr: func(*engine.ChatErrorContext) error { return errors.New("from second") }}
	h := engine.Compose(panicHooks{}, rec)
	ctx := context.Background()
	decisions := []struct {
		hook string
		call func() error
	}{
		{"beforeTurn", func() error { _, err := h.BeforeTurn(ctx, &engine.TurnContext{}); return err }},
		{"beforeStep", func() error { _, err := h.BeforeStep(ctx, &engine.PrepareStepContext{}); return err }},
		{"beforeToolCall", func() error { _, err := h.BeforeToolCall(ctx, &engine.ToolCallContext{}); return err }},
		{"toolResult", func() error { _, err := h.ToolResult(ctx, &engine.ToolCallResultContext{}); return err }},
	}
	for _, d := range decisions {
		if err := d.call(); err == nil || err.Error() != d.hook+" hook panicked: "+d.hook {
			t.Errorf("%s: error %v", d.hook, err)
		}
	}
	h.AfterToolCall(ctx, &engine.ToolCallResultContext{ToolName: "A"})
	h.OnStepFinish(ctx, &engine.StepResult{})
	h.OnChunk(ctx, &engine.ChunkContext{})
	h.OnChatResponse(ctx, &engine.ChatResponseResult{Status: engine.StatusCompleted})
	if err := h.OnChatError(ctx, &engine.ChatErrorContext{Message: "raw"}); err == nil || err.Error() != "from second" {
		t.Errorf("onChatError: %v", err)
	}
	want := []string{"afterToolCall A", "onStepFinish 0", "onChunk…", "onChatResponse completed", "onChatError "}
	if got := rec.sequence(); !slices.Equal(got, want) {
		t.Errorf("second member saw %q", got)
	}
	// The decision hooks stopped at the panic: the second member was not asked.
	if len(rec.calls) != 0 {
		t.Errorf("beforeToolCall reached the second member after a panic")
	}
}
