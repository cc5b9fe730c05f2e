package celrules

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

func mustCompile(t testing.TB, files ...policy.File) *Set {
	t.Helper()
	s, errs := Compile(files, Options{})
	if errs != nil {
		t.Fatalf("compile: %v", errs)
	}
	return s
}

func file(path, text string) policy.File { return policy.File{Path: path, Data: []byte(text)} }

func text(role, s string) engine.ModelMessage {
	return engine.ModelMessage{Role: role, Content: []engine.ContentPart{{Type: engine.ContentText, Text: s}}}
}

var epoch = time.Unix(0, 0).UTC()

// TestTurnFieldsRoundTrip sets every beforeTurn field and checks the value
// that lands in TurnConfig.
func TestTurnFieldsRoundTrip(t *testing.T) {
	s := mustCompile(t, file("all.yaml", `
beforeTurn:
  - name: everything
    set:
      model: '"fast"'
      system: turn.system + " Be brief."
      messages: '[textMessage("user", "hi")] + lastMessages(turn.messages, 1)'
      activeTools: '["read", "write"]'
      toolChoice: '{"type": "tool", "toolName": "read"}'
      maxSteps: "3"
      stopWhen: hasToolCall("finalAnswer")
      sendReasoning: "false"
      maxOutputTokens: "1024"
      temperature: "0"
      topP: "0.9"
      topK: "40"
      presencePenalty: "0.5"
      frequencyPenalty: "-0.5"
      stopSequences: '["END"]'
      seed: "42"
      maxRetries: "0"
      timeout: '{"totalMs": 30000, "chunkMs": 5000}'
      headers: '{"x-tenant": principal.tenant}'
      providerOptions: '{"openai": {"reasoningEffort": "low", "n": 1}}'
      output: '{"name": "verdict", "schema": {"type": "object", "properties": {"severity": {"enum": ["low", "high"]}}}}'
      telemetry: '{"recordInputs": principal.tenant == "acme", "recordOutputs": false}'
      refuse: '"no PDFs: " + principal.tenant'
`))
	tc := &engine.TurnContext{
		System:   "You help.",
		Messages: []engine.ModelMessage{text("user", "a"), text("assistant", "b")},
		Identity: engine.Identity{Principal: engine.Principal{Tenant: "acme"}},
	}
	cfg, tr, err := s.BeforeTurn(context.Background(), tc, epoch)
	if err != nil {
		t.Fatal(err)
	}
	want := &engine.TurnConfig{
		Model:            ptr("fast"),
		System:           ptr("You help. Be brief."),
		Messages:         &[]engine.ModelMessage{text("user", "hi"), text("assistant", "b")},
		ActiveTools:      &[]string{"read", "write"},
		ToolChoice:       &engine.ToolChoice{Type: "tool", ToolName: "read"},
		MaxSteps:         ptr(3),
		StopWhen:         []engine.StopCondition{{Type: engine.StopHasToolCall, ToolName: "finalAnswer"}},
		SendReasoning:    ptr(false),
		MaxOutputTokens:  ptr(1024),
		Temperature:      ptr(0.0),
		TopP:             ptr(0.9),
		TopK:             ptr(40),
		PresencePenalty:  ptr(0.5),
		FrequencyPenalty: ptr(-0.5),
		StopSequences:    &[]string{"END"},
		Seed:             ptr(int64(42)),
		MaxRetries:       ptr(0),
		Timeout:          &engine.TimeoutConfig{TotalMs: 30000, ChunkMs: 5000},
		Headers:          map[string]string{"x-tenant": "acme"},
		ProviderOptions:  map[string]any{"openai": map[string]any{"reasoningEffort": "low", "n": int64(1)}},
		Output: &engine.OutputSpec{Name: "verdict",
			Schema: json.RawMessage(`{"properties":{"severity":{"enum":["low","high"]}},"type":"object"}`)},
		Telemetry: &engine.TelemetryConfig{RecordInputs: true},
		Refuse:    ptr("no PDFs: acme"),
	}
	if !reflect.DeepEqual(cfg, want) {
		g, _ := json.Marshal(cfg)
		w, _ := json.Marshal(want)
		t.Errorf("config:\n got %s\nwant %s", g, w)
	}
	if len(tr.SetBy) != 23 {
		t.Errorf("SetBy has %d fields, want 23: %v", len(tr.SetBy), tr.SetBy)
	}
}

// TestStepFieldsRoundTrip sets every beforeStep field.
func TestStepFieldsRoundTrip(t *testing.T) {
	s := mustCompile(t, file("step.yaml", `
beforeStep:
  - name: everything
    set:
      model: step.model + "-mini"
      toolChoice: '"required"'
      activeTools: step.activeTools.filter(t, t != "write")
      system: '"step " + string(step.stepNumber)'
      messages: '[{"role": "user", "content": [{"type": "text", "text": "only this"}]}]'
      providerOptions: '{"anthropic": {"cacheControl": true}}'
`))
	sc := &engine.PrepareStepContext{StepNumber: 2, Model: "big", ActiveTools: []string{"read", "write"}}
	cfg, _, err := s.BeforeStep(context.Background(), sc, epoch)
	if err != nil {
		t.Fatal(err)
	}
	want := &engine.StepConfig{
		Model:           ptr("big-mini"),
		ToolChoice:      &engine.ToolChoice{Type: "required"},
		ActiveTools:     &[]string{"read"},
		System:          ptr("step 2"),
		Messages:        &[]engine.ModelMessage{text("user", "only this")},
		ProviderOptions: map[string]any{"anthropic": map[string]any{"cacheControl": true}},
	}
	if !reflect.DeepEqual(cfg, want) {
		g, _ := json.Marshal(cfg)
		w, _ := json.Marshal(want)
		t.Errorf("config:\n got %s\nwant %s", g, w)
	}
}

// TestMergeOrder checks files by path, rules in order, later scalars win,
// maxSteps takes the minimum, stopWhen accumulates, activeTools intersect,
// and SetBy names the rule whose value won. merge_test.go covers each
// field's combination in both file orders.
func TestMergeOrder(t *testing.T) {
	s := mustCompile(t,
		file("b.yaml", `
beforeTurn:
  - name: b1
    set:
      model: '"from-b1"'
      activeTools: '["search"]'
      stopWhen: stepCountIs(5)
  - name: b2-never
    when: "false"
    set:
      model: '"never"'
`),
		file("a.yaml", `
beforeTurn:
  - name: a1
    set:
      model: '"from-a1"'
      maxSteps: "4"
      activeTools: '["read", "write"]'
      stopWhen: '[hasToolCall("done")]'
`))
	cfg, tr, err := s.BeforeTurn(context.Background(), &engine.TurnContext{}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Model != "from-b1" || *cfg.MaxSteps != 4 || !reflect.DeepEqual(*cfg.ActiveTools, []string{}) {
		t.Errorf("scalars: model %q maxSteps %d activeTools %v", *cfg.Model, *cfg.MaxSteps, *cfg.ActiveTools)
	}
	wantStop := []engine.StopCondition{{Type: engine.StopHasToolCall, ToolName: "done"}, {Type: engine.StopStepCount, Count: 5}}
	if !reflect.DeepEqual(cfg.StopWhen, wantStop) {
		t.Errorf("stopWhen = %v, want %v", cfg.StopWhen, wantStop)
	}
	if want := []string{"a.yaml#a1", "b.yaml#b1"}; !reflect.DeepEqual(tr.RulesFired, want) {
		t.Errorf("RulesFired = %v, want %v", tr.RulesFired, want)
	}
	wantSetBy := map[string]string{"model": "b.yaml#b1", "maxSteps": "a.yaml#a1", "activeTools": "b.yaml#b1", "stopWhen": "b.yaml#b1"}
	if !reflect.DeepEqual(tr.SetBy, wantSetBy) {
		t.Errorf("SetBy = %v, want %v", tr.SetBy, wantSetBy)
	}
	wantRules := []RuleInfo{
		{ID: "a.yaml#a1", Location: policy.Location{File: "a.yaml", Line: 3, Column: 11}},
		{ID: "b.yaml#b1", Location: policy.Location{File: "b.yaml", Line: 3, Column: 11}},
		{ID: "b.yaml#b2-never", Location: policy.Location{File: "b.yaml", Line: 8, Column: 11}},
	}
	if got := s.Rules(policy.HookBeforeTurn); !reflect.DeepEqual(got, wantRules) {
		t.Errorf("Rules = %v", got)
	}
}

func TestNoMatchReturnsNil(t *testing.T) {
	s := mustCompile(t, file("r.yaml", `
beforeTurn:
  - name: only-continuations
    when: turn.continuation
    set: {model: '"fast"'}
`))
	cfg, tr, err := s.BeforeTurn(context.Background(), &engine.TurnContext{}, epoch)
	if err != nil || cfg != nil || tr.RulesFired != nil {
		t.Errorf("got %v, %+v, %v; want nil overrides and an empty trace", cfg, tr, err)
	}
	if s.HasBeforeStep() || !s.HasBeforeTurn() {
		t.Error("HasBeforeTurn/HasBeforeStep wrong")
	}
	scfg, _, err := s.BeforeStep(context.Background(), &engine.PrepareStepContext{}, epoch)
	if err != nil || scfg != nil {
		t.Errorf("BeforeStep without rules = %v, %v", scfg, err)
	}
}

// TestVariables reads every declared variable and nested field.
func TestVariables(t *testing.T) {
	tc := &engine.TurnContext{
		Identity: engine.Identity{RequestID: "req", SessionID: "sess", Agent: "helper", EntryPath: engine.EntryChat,
			Principal: engine.Principal{Tenant: "acme", Subject: "ann", Roles: []string{"admin"}}},
		System: "sys", Model: "big", MaxSteps: 10, Body: map[string]any{"mode": "x", "n": 2.0},
		Messages: []engine.ModelMessage{{Role: "assistant", Content: []engine.ContentPart{
			{Type: engine.ContentToolCall, ToolName: "search", ToolCallID: "c1", Input: json.RawMessage(`{"q":"go"}`)}}}},
		Tools: []engine.ToolInfo{{Name: "search", Kind: engine.ToolKindHTTP, InputSchema: json.RawMessage(`{"type":"object"}`)}},
		Attachments: []engine.Attachment{{MediaType: "image/png", Filename: "a.png", Size: 70},
			{MediaType: "application/pdf", Size: -1, Remote: true, URL: "https://example.com/a.pdf"}},
	}
	sc := &engine.PrepareStepContext{Identity: tc.Identity, StepNumber: 1, Turn: tc, ActiveTools: []string{"search"},
		Messages: []engine.ModelMessage{text("user", "a"), text("assistant", "b"), text("user", "c"), text("assistant", "d")},
		Steps: []engine.StepResult{{StepNumber: 0, Text: "t", FinishReason: engine.FinishToolCalls,
			ToolCalls:   []engine.ToolCall{{ToolName: "search", ToolCallID: "c1", Input: json.RawMessage(`{"q":"go"}`)}},
			ToolResults: []engine.ToolResult{{ToolName: "search", ToolCallID: "c1", Output: json.RawMessage(`[1,2]`)}},
			Usage:       engine.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CachedInputTokens: 3}}}}
	checks := []string{
		`turn.requestId == "req" && turn.sessionId == "sess" && turn.agent == "helper" && turn.entryPath == "chat"`,
		`turn.system == "sys" && turn.model == "big" && turn.maxSteps == 10 && !turn.continuation && turn.depth == 0`,
		`turn.body.mode == "x" && turn.body.n == 2 && !has(turn.body.missing)`,
		`turn.messages[0].content[0].input.q == "go" && turn.messages[0].content[0].toolName == "search"`,
		`turn.tools[0].name == "search" && turn.tools[0].kind == "http" && turn.tools[0].inputSchema.type == "object"`,
		`principal.tenant == "acme" && principal.subject == "ann" && "admin" in principal.roles`,
		`[turn.tools, turn.tools, turn.tools].flatten().map(t, t.name + string(t.dynamic)) == ["searchfalse", "searchfalse", "searchfalse"]`,
		`step.messages.size() == 4 && step.messages.map(m, m.text) == ["a", "b", "c", "d"] && step.messages.filter(m, m.text > "b").size() == 2`,
		`now == timestamp("1970-01-01T00:00:00Z")`,
		`turn.attachments.size() == 2 && turn.attachments[0].mediaType == "image/png" && turn.attachments[0].filename == "a.png" && turn.attachments[0].size == 70 && !turn.attachments[0].remote && turn.attachments[0].url == ""`,
		`turn.attachments.exists(a, a.remote && a.size == -1 && a.url.startsWith("https://example.com/")) && !turn.attachments.all(a, a.mediaType.startsWith("image/"))`,
		`step.stepNumber == 1 && step.activeTools == ["search"] && step.steps.size() == 1`,
		`step.steps[0].toolCalls[0].input.q == "go" && step.steps[0].toolResults[0].output == [1, 2]`,
		`step.steps[0].usage.totalTokens == 15 && step.steps[0].usage.cachedInputTokens == 3 && step.steps[0].finishReason == "tool-calls"`,
		`step.steps.exists(s, s.toolCalls.exists(c, c.toolName == "search"))`,
		`hasToolCall(step.steps, "search") && !hasToolCall(step.steps, "other") && stepCountIs(step.steps, 1)`,
		`"hello world".split(" ").size() == 2 && [1, 2, 3].slice(1, 2) == [2] && math.greatest(1, 2) == 2`,
		`sets.contains(["a", "b"], ["a"]) && base64.encode(b"hi") == "aGk="`,
	}
	for _, c := range checks {
		t.Run(c, func(t *testing.T) {
			s := mustCompile(t, file("v.yaml", "beforeStep:\n  - name: v\n    when: '"+strings.ReplaceAll(c, "'", "''")+"'\n    set: {model: '\"yes\"'}\n"))
			cfg, _, err := s.BeforeStep(context.Background(), sc, epoch)
			if err != nil {
				t.Fatal(err)
			}
			if cfg == nil {
				t.Error("condition was false")
			}
		})
	}
}

// TestEvalErrors checks that evaluation failures are positioned
// *policy.Errors with the right code, naming the rule and field.
func TestEvalErrors(t *testing.T) {
	tests := []struct {
		name, rules, code, msg string
		opts                   Options
		ctx                    func() context.Context
		turn                   *engine.TurnContext // default: a body and two messages
	}{
		{
			name: "missing body key",
			rules: `
beforeTurn:
  - name: needs-file
    set:
      system: turn.body.selectedFile`,
			code: policy.CodeEval, msg: "no such key",
		},
		{
			name: "dyn value of the wrong type",
			rules: `
beforeTurn:
  - name: steps-from-body
    set:
      maxSteps: turn.body.steps`,
			code: policy.CodeEval, msg: "field maxSteps: want int, got string",
		},
		{
			name: "tool choice built at run time",
			rules: `
beforeTurn:
  - name: choice-from-body
    set:
      toolChoice: turn.body.steps`,
			code: policy.CodeEval, msg: `"many" is not a tool choice`,
		},
		{
			name: "runtime cost limit",
			rules: `
beforeTurn:
  - name: runaway
    when: >-
      lastMessages(turn.messages, 5).exists(m,
        lists.range(2000).exists(i, i < 0))
    set: {model: '"x"'}`,
			opts: Options{CostLimit: 1000},
			code: policy.CodeCost, msg: "cost limit exceeded",
		},
		{
			name: "runaway stopped by the evaluation deadline",
			rules: `
beforeTurn:
  - name: runaway
    when: >-
      lastMessages(turn.messages, 5).exists(m,
        lists.range(200000).exists(i, i < 0))
    set: {model: '"x"'}`,
			code: policy.CodeTimeout, msg: "deadline exceeded",
		},
		{
			// The estimate (every pair of messages under the 1,000-message
			// bound) is within CostLimit, so no cost tracker runs; this
			// conversation is far beyond the bound, and the deadline ends it.
			name: "loop beyond the estimate's bounds stopped by the deadline",
			rules: `
beforeTurn:
  - name: all-pairs
    when: turn.messages.exists(a, turn.messages.exists(b, b.role == "x"))
    set: {model: '"x"'}`,
			opts: Options{CostLimit: 100_000_000},
			turn: &engine.TurnContext{Messages: slices.Repeat([]engine.ModelMessage{text("user", "a")}, 50_000)},
			code: policy.CodeTimeout, msg: "deadline exceeded",
		},
		{
			name: "cancelled context",
			rules: `
beforeTurn:
  - name: slow
    when: 'lastMessages(turn.messages, 2).exists(m, lists.range(500).exists(i, i < 0))'
    set: {model: '"x"'}`,
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			code: policy.CodeTimeout, msg: "context canceled",
		},
	}
	tc := &engine.TurnContext{Body: map[string]any{"steps": "many"},
		Messages: []engine.ModelMessage{text("user", "a"), text("user", "b")}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, errs := Compile([]policy.File{file("e.yaml", tt.rules)}, tt.opts)
			if errs != nil {
				t.Fatal(errs)
			}
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			turn := tc
			if tt.turn != nil {
				turn = tt.turn
			}
			cfg, _, err := s.BeforeTurn(ctx, turn, epoch)
			var pe *policy.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *policy.Error", err, err)
			}
			if cfg != nil {
				t.Error("a failed evaluation returned overrides")
			}
			if pe.Code != tt.code || !strings.Contains(pe.Message, tt.msg) || !strings.HasPrefix(pe.Rule, "e.yaml#") || pe.Location.Line == 0 {
				t.Errorf("got %s (code %s, rule %s), want code %s containing %q", pe, pe.Code, pe.Rule, tt.code, tt.msg)
			}
		})
	}
}

// TestConcurrentEval shares one Set between goroutines (run with -race).
func TestConcurrentEval(t *testing.T) {
	s := mustCompile(t, benchRules(policy.HookBeforeTurn, 10), benchRules(policy.HookBeforeStep, 10))
	done := make(chan error)
	for range 4 {
		go func() {
			tc := benchTurn()
			for range 50 {
				if _, _, err := s.BeforeTurn(context.Background(), tc, epoch); err != nil {
					done <- err
					return
				}
				if _, _, err := s.BeforeStep(context.Background(), &engine.PrepareStepContext{Turn: tc, StepNumber: 2}, epoch); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestConstantsNotShared checks that overrides computed from constant
// expressions (decoded once at load) are fresh in every evaluation: a
// caller that modifies one turn's config cannot change the next turn's.
func TestConstantsNotShared(t *testing.T) {
	s := mustCompile(t, file("c.yaml", `
beforeTurn:
  - name: constants
    set:
      model: '"fast"'
      activeTools: '["read", "search"]'
      stopWhen: '[hasToolCall("done"), stepCountIs(3)]'
      headers: '{"x-tier": "gold"}'
      timeout: '{"totalMs": 1000}'`))
	eval := func() *engine.TurnConfig {
		cfg, _, err := s.BeforeTurn(context.Background(), &engine.TurnContext{}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	first := eval()
	*first.Model = "changed"
	(*first.ActiveTools)[0] = "changed"
	first.StopWhen[0].ToolName = "changed"
	first.Headers["x-tier"] = "changed"
	first.Timeout.TotalMs = 1
	second := eval()
	if *second.Model != "fast" || (*second.ActiveTools)[0] != "read" || second.StopWhen[0].ToolName != "done" ||
		second.Headers["x-tier"] != "gold" || second.Timeout.TotalMs != 1000 {
		data, _ := json.Marshal(second)
		t.Errorf("second evaluation sees the first caller's changes: %s", data)
	}
}

// TestTelemetryField checks that telemetry is typed: a misspelt setting
// or a value of another type is a positioned load error.
func TestTelemetryField(t *testing.T) {
	tests := []struct{ name, value, want string }{
		{"misspelt setting", `'{"recordInput": true}'`, `field telemetry: want {"recordInputs": bool, "recordOutputs": bool}: json: unknown field "recordInput"`},
		{"not a bool", `'{"recordInputs": "yes"}'`, "field telemetry must be map(string, bool) but expression is map(string, string)"},
		{"not a map", `'true'`, "field telemetry must be map(string, bool) but expression is bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Compile([]policy.File{file("t.yaml", "beforeTurn:\n  - name: x\n    set:\n      telemetry: "+tt.value+"\n")}, Options{})
			if len(errs) != 1 || errs[0].Message != tt.want || errs[0].Location.Line != 4 {
				t.Fatalf("errors %v, want one at line 4: %s", errs, tt.want)
			}
		})
	}
}

// TestDeadlineAndAborted checks turn.deadline and turn.aborted: a rule
// picks a faster model when little time is left, and none when the turn
// is aborted.
func TestDeadlineAndAborted(t *testing.T) {
	s := mustCompile(t, file("t.yaml", `beforeTurn:
  - name: hurry
    when: '!turn.aborted && turn.deadline - now < duration("20s")'
    set: {model: '"fast"'}
`))
	tests := []struct {
		name     string
		deadline time.Duration // from now
		aborted  bool
		want     bool // the rule fires
	}{
		{"little time left", 10 * time.Second, false, true},
		{"plenty of time", time.Minute, false, false},
		{"aborted", 10 * time.Second, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &engine.TurnContext{Identity: engine.Identity{Deadline: epoch.Add(tt.deadline), Aborted: tt.aborted}}
			cfg, _, err := s.BeforeTurn(context.Background(), tc, epoch)
			if err != nil || (cfg != nil) != tt.want {
				t.Errorf("BeforeTurn = %+v, %v; want the rule to fire: %v", cfg, err, tt.want)
			}
		})
	}
}

// TestDeadlineAndAbortedEveryHook: beforePersist and onChatError rules
// read the turn's deadline and abort signal as deadline and aborted.
func TestDeadlineAndAbortedEveryHook(t *testing.T) {
	s := mustCompile(t, file("t.yaml", `beforePersist:
  - name: hurried
    when: '!aborted && deadline - now < duration("20s")'
    set: {redact: '["secret"]'}
onChatError:
  - name: hurried
    when: '!aborted && deadline - now < duration("20s")'
    set: {message: '"out of time"'}
`))
	for _, tt := range []struct {
		name     string
		deadline time.Duration // from now
		aborted  bool
		want     bool // the rules fire
	}{
		{"little time left", 10 * time.Second, false, true},
		{"plenty of time", time.Minute, false, false},
		{"aborted", 10 * time.Second, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := engine.Identity{Deadline: epoch.Add(tt.deadline), Aborted: tt.aborted}
			m := &engine.UIMessage{ID: "m", Role: "user", Parts: []engine.UIPart{{Type: engine.PartText, Text: "a secret"}}}
			p, _, err := s.BeforePersist(context.Background(), &id, m, epoch)
			if err != nil || (p != nil) != tt.want {
				t.Errorf("BeforePersist = %+v, %v; want the rule to fire: %v", p, err, tt.want)
			}
			d, _, err := s.OnChatError(context.Background(), &engine.ChatErrorContext{Identity: id, Class: engine.ClassFatal}, epoch)
			if err != nil || (d != nil) != tt.want {
				t.Errorf("OnChatError = %+v, %v; want the rule to fire: %v", d, err, tt.want)
			}
		})
	}
}
