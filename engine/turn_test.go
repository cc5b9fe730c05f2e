package engine_test

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
)

func ptr[T any](v T) *T { return &v }

func TestContinuation(t *testing.T) {
	prev := engine.UIMessage{ID: "msg_prev", Role: engine.RoleAssistant, Parts: []engine.UIPart{
		{Type: engine.PartStepStart},
		{Type: "tool-getLocation", ToolCallID: "c1", State: engine.ToolStateOutputAvailable, Input: json.RawMessage(`{}`), Output: json.RawMessage(`"Paris"`)},
	}}
	t.Run("after client tool result", func(t *testing.T) {
		fake := newFake(textStep("You are in Paris."))
		h := newHarness(t, fake)
		h.req.Messages = []engine.UIMessage{userMsg("where am I?"), prev}
		h.req.Continuation, h.req.MessageID = true, ""
		res := h.run(context.Background())
		if res.Message.ID != "msg_prev" || !res.Continuation {
			t.Fatalf("message id %s continuation %v", res.Message.ID, res.Continuation)
		}
		if !strings.HasPrefix(h.ev.text(), `{"type":"start","messageId":"msg_prev"}`) {
			t.Errorf("start: %s", h.ev.text())
		}
		if len(res.Message.Parts) != 4 || !reflect.DeepEqual(res.Message.Parts[:2], prev.Parts) ||
			res.Message.Parts[2].Type != engine.PartStepStart || res.Message.Parts[3].Text != "You are in Paris." {
			t.Errorf("parts %+v", res.Message.Parts)
		}
		msgs := fake.requests()[0].Messages
		if last := msgs[len(msgs)-1]; last.Role != engine.RoleTool || string(last.Content[0].Output) != `"Paris"` {
			t.Errorf("model messages end with %+v", last)
		}
		if len(prev.Parts) != 2 {
			t.Error("request message mutated")
		}
	})
	t.Run("continue last turn", func(t *testing.T) {
		cut := engine.UIMessage{ID: "msg_prev", Role: engine.RoleAssistant, Parts: []engine.UIPart{
			{Type: engine.PartStepStart}, {Type: engine.PartText, Text: "Once upon", State: engine.StateDone},
		}}
		fake := newFake(textStep(" a time."))
		h := newHarness(t, fake)
		h.req.Messages = []engine.UIMessage{userMsg("tell a story"), cut}
		h.req.Continuation = true
		res := h.run(context.Background())
		msgs := fake.requests()[0].Messages
		last := msgs[len(msgs)-1]
		if last.Role != engine.RoleUser || !strings.HasPrefix(last.Text(), "Continue your previous response") {
			t.Errorf("last model message %+v", last)
		}
		for _, p := range res.Message.Parts {
			if strings.HasPrefix(p.Text, "Continue your previous") {
				t.Error("ephemeral continue message persisted")
			}
		}
		if res.Message.ID != "msg_prev" {
			t.Errorf("id %s", res.Message.ID)
		}
	})
}

func TestAbort(t *testing.T) {
	t.Run("mid-stream", func(t *testing.T) {
		fake := newFake(script{parts: textParts("t", "partial", "more")[:2], hang: true})
		h := newHarness(t, fake)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		h.rec.onChunk = func(c *engine.ChunkContext) {
			if c.Chunk.Type == engine.StreamTextDelta {
				cancel()
			}
		}
		res := h.run(ctx)
		if res.Status != engine.StatusAborted || res.FinishReason != engine.FinishInterrupted {
			t.Fatalf("status %s finish %s", res.Status, res.FinishReason)
		}
		if got := res.Message.Parts; len(got) != 2 || got[1].Text != "partial" || got[1].State != engine.StateStreaming {
			t.Errorf("partial message %+v, want its text part still streaming", got)
		}
		if string(res.Message.Metadata) != `{"interrupted":"aborted"}` {
			t.Errorf("metadata %s, want interrupted: aborted", res.Message.Metadata)
		}
		types := h.ev.types()
		if !slices.Equal(types[len(types)-2:], []string{engine.EventMessageMetadata, engine.EventAbort}) || slices.Contains(types, engine.EventFinish) {
			t.Errorf("events %q, want message-metadata then abort", types)
		}
		if len(h.rec.resp) != 1 || h.rec.resp[0].Status != engine.StatusAborted || len(h.rec.errs) != 0 {
			t.Errorf("onChatResponse %+v onChatError %+v", h.rec.resp, h.rec.errs)
		}
	})
	t.Run("during tools", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cancelled := make(chan struct{})
		a := echoTool("A")
		a.Executor = engine.ExecutorFunc(func(tctx context.Context, _ engine.ToolExecution) (json.RawMessage, error) {
			cancel()
			<-tctx.Done()
			close(cancelled)
			return nil, tctx.Err()
		})
		fake := newFake(callStep(`A={"q":"x"}`), textStep("never"))
		h := newHarness(t, fake, a)
		res := h.run(ctx)
		<-cancelled // the running tool saw its context cancelled
		if res.Status != engine.StatusAborted || len(fake.requests()) != 1 {
			t.Fatalf("status %s, %d model requests", res.Status, len(fake.requests()))
		}
		if len(h.rec.after) != 0 {
			t.Error("afterToolCall fired for an aborted call")
		}
	})
}

func TestRetries(t *testing.T) {
	e503 := &engine.UpstreamError{Status: 503, Retryable: true, Message: "overloaded"}
	e429 := &engine.UpstreamError{Status: 429, Retryable: true, RetryAfter: time.Millisecond, Message: "slow down"}
	e400 := &engine.UpstreamError{Status: 400, Message: "bad request: secret detail"}
	tests := []struct {
		name       string
		scripts    []script
		maxRetries *int
		base       time.Duration
		status     string
		requests   int
	}{
		{name: "5xx then 429 then success", scripts: []script{{err: e503}, {err: e429}, textStep("ok")}, status: engine.StatusCompleted, requests: 3},
		// A one-hour base delay would hang the test unless Retry-After wins.
		{name: "retry-after honoured", scripts: []script{{err: e429}, textStep("ok")}, base: time.Hour, status: engine.StatusCompleted, requests: 2},
		{name: "error before first part is retried", scripts: []script{{failAfter: e503}, textStep("ok")}, status: engine.StatusCompleted, requests: 2},
		{name: "gives up after maxRetries", scripts: []script{{err: e503}, {err: e503}, {err: e503}, textStep("ok")}, status: engine.StatusError, requests: 3},
		{name: "maxRetries from config", scripts: []script{{err: e503}, textStep("ok")}, maxRetries: ptr(0), status: engine.StatusError, requests: 1},
		{name: "not retryable", scripts: []script{{err: e400}, textStep("ok")}, status: engine.StatusError, requests: 1},
		{name: "no retry after the first part", scripts: []script{{parts: textParts("t", "a")[:2], failAfter: e503}, textStep("ok")}, status: engine.StatusError, requests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(tt.scripts...)
			h := newHarness(t, fake)
			if tt.base > 0 {
				h.eng = engine.New(engine.Options{Models: models{"m": fake}, RetryBaseDelay: tt.base, Logger: quiet})
			}
			h.req.Defaults.MaxRetries = tt.maxRetries
			res := h.run(context.Background())
			if res.Status != tt.status || len(fake.requests()) != tt.requests {
				t.Fatalf("status %s after %d requests; want %s after %d", res.Status, len(fake.requests()), tt.status, tt.requests)
			}
			if res.Status == engine.StatusError && res.Error != "An error occurred." {
				t.Errorf("client-visible error %q leaks", res.Error)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name    string
		timeout engine.TimeoutConfig
		want    string
		class   string // a stall is transient (the client may retry), a total timeout fatal
	}{
		{name: "chunk", timeout: engine.TimeoutConfig{ChunkMs: 20}, want: "model stream stalled: no chunk for 20ms (timeout.chunkMs)", class: engine.ClassTransient},
		{name: "total", timeout: engine.TimeoutConfig{TotalMs: 30}, want: "turn timed out after 30ms (timeout.totalMs)", class: engine.ClassFatal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(script{parts: textParts("t", "partial")[:2], hang: true})
			h := newHarness(t, fake)
			h.req.Defaults.Timeout = &tt.timeout
			res := h.run(context.Background())
			if res.Status != engine.StatusError || res.Error != tt.want || res.ErrorClass != tt.class {
				t.Fatalf("status %s error %q class %q, want class %q", res.Status, res.Error, res.ErrorClass, tt.class)
			}
			if len(h.rec.errs) == 1 && h.rec.errs[0].Class != tt.class {
				t.Errorf("onChatError sees class %q, want %q", h.rec.errs[0].Class, tt.class)
			}
			if res.Message.Parts[1].Text != "partial" {
				t.Errorf("partial lost: %+v", res.Message.Parts)
			}
			types := h.ev.types()
			if want := []string{"error", "finish-step", "finish"}; !slices.Equal(types[len(types)-3:], want) {
				t.Errorf("events %q", types)
			}
			if len(h.rec.errs) != 1 || h.rec.errs[0].Stage != engine.StageStream {
				t.Errorf("onChatError %+v", h.rec.errs)
			}
		})
	}
}

func TestStopConditions(t *testing.T) {
	loop := func(n int) []script {
		var s []script
		for range n {
			s = append(s, callStep(`A={"q":"again"}`))
		}
		return s
	}
	// budgetAfter answers a budget that runs out once n steps ran.
	budgetAfter := func(n int) func(*harness) func(context.Context) string {
		return func(h *harness) func(context.Context) string {
			return func(context.Context) string {
				if len(h.rec.steps) >= n {
					return "token budget used up"
				}
				return ""
			}
		}
	}
	tests := []struct {
		name     string
		cfg      engine.TurnConfig
		budget   func(*harness) func(context.Context) string
		scripts  []script
		steps    int
		stopText string
	}{
		{name: "default maxSteps", scripts: loop(12), steps: engine.DefaultMaxSteps, stopText: "Stopped after 10 steps (maxSteps)."},
		{name: "maxSteps", cfg: engine.TurnConfig{MaxSteps: ptr(2)}, scripts: loop(3), steps: 2, stopText: "Stopped after 2 steps (maxSteps)."},
		{name: "stepCount", cfg: engine.TurnConfig{StopWhen: []engine.StopCondition{{Type: engine.StopStepCount, Count: 1}}}, scripts: loop(3), steps: 1,
			stopText: "Stopped after 1 step (stopWhen stepCount 1)."},
		{name: "hasToolCall", cfg: engine.TurnConfig{StopWhen: []engine.StopCondition{{Type: engine.StopHasToolCall, ToolName: "final"}}},
			scripts: []script{callStep(`A={"q":"x"}`), callStep(`final={"q":"42"}`), textStep("never")}, steps: 2,
			stopText: `Stopped after 2 steps (stopWhen hasToolCall "final").`},
		{name: "text answer ends the loop", cfg: engine.TurnConfig{MaxSteps: ptr(5)}, scripts: []script{callStep(`A={"q":"x"}`), textStep("done")}, steps: 2},
		{name: "step budget", budget: budgetAfter(2), scripts: loop(5), steps: 2, stopText: "Stopped after 2 steps (token budget used up)."},
		{name: "step budget not reached", budget: budgetAfter(9), cfg: engine.TurnConfig{MaxSteps: ptr(5)}, scripts: []script{callStep(`A={"q":"x"}`), textStep("done")}, steps: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(tt.scripts...)
			h := newHarness(t, fake, echoTool("A"), echoTool("final"))
			h.rec.turn = func(*engine.TurnContext) (*engine.TurnConfig, error) { return &tt.cfg, nil }
			if tt.budget != nil {
				h.req.StepBudget = tt.budget(h)
			}
			res := h.run(context.Background())
			if res.Status != engine.StatusCompleted || len(res.Steps) != tt.steps || len(fake.requests()) != tt.steps {
				t.Fatalf("status %s, %d steps, %d requests; want %d", res.Status, len(res.Steps), len(fake.requests()), tt.steps)
			}
			last := res.Message.Parts[len(res.Message.Parts)-1]
			if tt.stopText == "" {
				if last.Text != "done" {
					t.Errorf("last part %+v", last)
				}
				return
			}
			// The resubmission guard: the message ends with a text-only step.
			prev := res.Message.Parts[len(res.Message.Parts)-2]
			if last.Text != tt.stopText || prev.Type != engine.PartStepStart {
				t.Errorf("message ends with %+v, %+v", prev, last)
			}
			types := h.ev.types()
			if want := []string{"start-step", "text-start", "text-delta", "text-end", "finish-step", "finish"}; !slices.Equal(types[len(types)-6:], want) {
				t.Errorf("events end %q", types[len(types)-6:])
			}
		})
	}
}

func TestStructuredOutput(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}`)
	tests := []struct {
		name, text, status, output string
	}{
		{name: "valid", text: `{ "answer": 42 }`, status: engine.StatusCompleted, output: `{"answer":42}`},
		{name: "schema violation", text: `{"answer":"42"}`, status: engine.StatusError},
		{name: "not JSON", text: `The answer is 42.`, status: engine.StatusError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(textStep(tt.text))
			h := newHarness(t, fake)
			h.req.Defaults.Output = &engine.OutputSpec{Name: "answer", Schema: schema}
			res := h.run(context.Background())
			if res.Status != tt.status || string(res.Output) != tt.output {
				t.Fatalf("status %s output %s error %q", res.Status, res.Output, res.Error)
			}
			if got := fake.requests()[0].Output; got == nil || string(got.Schema) != string(schema) {
				t.Errorf("provider not asked for structured output: %+v", got)
			}
			if tt.status == engine.StatusError && !strings.HasPrefix(res.Error, "structured output: the final answer does not match the output schema") {
				t.Errorf("error %q", res.Error)
			}
		})
	}
}

func TestErrorPath(t *testing.T) {
	providerErr := errors.New("upstream: status 500: internal details sk-123")
	t.Run("masked by default", func(t *testing.T) {
		fake := newFake(script{parts: textParts("t1", "partial")[:2], failAfter: providerErr})
		h := newHarness(t, fake)
		res := h.run(context.Background())
		want := strings.Join([]string{
			`{"type":"start","messageId":"msg_assistant_1"}`,
			`{"type":"start-step"}`,
			`{"type":"text-start","id":"t1"}`,
			`{"type":"text-delta","id":"t1","delta":"partial"}`,
			`{"type":"error","errorText":"An error occurred."}`,
			`{"type":"finish-step"}`,
			`{"type":"finish","finishReason":"error","messageMetadata":{"interrupted":"error"}}`,
		}, "\n")
		if got := h.ev.text(); got != want {
			t.Errorf("stream\n got %s\nwant %s", got, want)
		}
		// The cut-off text stays "streaming" (no text-end was sent, so the
		// AI SDK client holds it so too) and the message says why.
		if p := res.Message.Parts[1]; res.Status != engine.StatusError || p.Text != "partial" || p.State != engine.StateStreaming {
			t.Errorf("status %s parts %+v", res.Status, res.Message.Parts)
		}
		if string(res.Message.Metadata) != `{"interrupted":"error"}` {
			t.Errorf("metadata %s, want interrupted: error", res.Message.Metadata)
		}
		if len(h.rec.errs) != 1 || !errors.Is(h.rec.errs[0].Err, providerErr) || !h.rec.errs[0].PartialMessage {
			t.Errorf("onChatError %+v", h.rec.errs)
		}
		if r := h.rec.resp; len(r) != 1 || r[0].Status != engine.StatusError || r[0].Error != "An error occurred." {
			t.Errorf("onChatResponse %+v", r)
		}
	})
	t.Run("onChatError replaces the text", func(t *testing.T) {
		fake := newFake(script{failAfter: providerErr})
		h := newHarness(t, fake)
		h.rec.chatErr = func(*engine.ChatErrorContext) error { return errors.New("The model is unavailable, try again.") }
		res := h.run(context.Background())
		if res.Error != "The model is unavailable, try again." || !strings.Contains(h.ev.text(), `"errorText":"The model is unavailable, try again."`) {
			t.Errorf("error %q, stream %s", res.Error, h.ev.text())
		}
	})
	setup := []struct {
		name  string
		model string
		turn  func(*engine.TurnContext) (*engine.TurnConfig, error)
	}{
		{name: "unknown model", model: "nope"},
		{name: "beforeTurn error", model: "m", turn: func(*engine.TurnContext) (*engine.TurnConfig, error) { return nil, errors.New("rules broken") }},
		{name: "beforeTurn panic", model: "m", turn: func(*engine.TurnContext) (*engine.TurnConfig, error) { panic("boom") }},
		{name: "invalid maxSteps", model: "m", turn: func(*engine.TurnContext) (*engine.TurnConfig, error) {
			return &engine.TurnConfig{MaxSteps: ptr(0)}, nil
		}},
	}
	for _, tt := range setup {
		t.Run("setup/"+tt.name, func(t *testing.T) {
			fake := newFake(textStep("never"))
			h := newHarness(t, fake)
			h.req.Model, h.rec.turn = tt.model, tt.turn
			res := h.run(context.Background())
			if res.Status != engine.StatusError || len(fake.requests()) != 0 {
				t.Fatalf("status %s requests %d", res.Status, len(fake.requests()))
			}
			if want := []string{"start", "error", "finish"}; !slices.Equal(h.ev.types(), want) {
				t.Errorf("events %q", h.ev.types())
			}
			if len(h.rec.errs) != 1 || h.rec.errs[0].Stage != engine.StageSetup || len(h.rec.resp) != 1 {
				t.Errorf("onChatError %+v onChatResponse %d", h.rec.errs, len(h.rec.resp))
			}
		})
	}
}

func TestPanickingObservationHooksDoNotAbort(t *testing.T) {
	fake := newFake(callStep(`A={"q":"x"}`), textStep("ok"))
	h := newHarness(t, fake, echoTool("A"))
	h.rec.panicOnObs = true
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted || len(res.Steps) != 2 {
		t.Fatalf("status %s steps %d", res.Status, len(res.Steps))
	}
	composed := engine.Compose(h.rec, &recorder{})
	h2 := newHarness(t, newFake(textStep("ok")))
	h2.req.Hooks = composed
	if res := h2.run(context.Background()); res.Status != engine.StatusCompleted {
		t.Fatalf("composed: status %s", res.Status)
	}
}

func TestTurnConfigReachesRequest(t *testing.T) {
	fake := newFake(callStep(`A={"q":"x"}`), textStep("ok"))
	h := newHarness(t, fake, echoTool("A"), echoTool("B"))
	h.req.Defaults = engine.TurnConfig{Temperature: ptr(0.1), Headers: map[string]string{"x-a": "1"}}
	extra := echoTool("C")
	cfg := &engine.TurnConfig{
		Model:            ptr("other"),
		System:           ptr("be precise"),
		Tools:            []engine.Tool{extra},
		ActiveTools:      &[]string{"A", "C"},
		ToolChoice:       &engine.ToolChoice{Type: engine.ToolChoiceRequired},
		SendReasoning:    ptr(false),
		MaxOutputTokens:  ptr(100),
		Temperature:      ptr(0.5),
		TopP:             ptr(0.9),
		TopK:             ptr(40),
		PresencePenalty:  ptr(0.2),
		FrequencyPenalty: ptr(0.3),
		StopSequences:    &[]string{"END"},
		Seed:             ptr(int64(7)),
		Headers:          map[string]string{"x-b": "2"},
		ProviderOptions:  map[string]any{"openai": map[string]any{"user": "u"}},
	}
	h.rec.turn = func(tc *engine.TurnContext) (*engine.TurnConfig, error) {
		if tc.Model != "m" || tc.System != "be brief" || len(tc.Tools) != 2 || tc.MaxSteps != engine.DefaultMaxSteps || tc.RequestID != "req1" {
			t.Errorf("turn context %+v", tc)
		}
		return cfg, nil
	}
	h.rec.stepCfg = func(sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
		if sc.StepNumber == 0 {
			if sc.Model != "other" || sc.Turn == nil || sc.Turn.System != "be precise" || !slices.Equal(sc.ActiveTools, []string{"A", "C"}) {
				t.Errorf("step context %+v", sc)
			}
			return &engine.StepConfig{ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: "A"}, System: ptr("step zero"),
				ProviderOptions: map[string]any{"anthropic": true}}, nil
		}
		if len(sc.Steps) != 1 {
			t.Errorf("step 1 sees %d previous steps", len(sc.Steps))
		}
		return nil, nil
	}
	if res := h.run(context.Background()); res.Status != engine.StatusCompleted {
		t.Fatalf("status %s %s", res.Status, res.Error)
	}
	reqs := fake.requests()
	r := reqs[0]
	want := &engine.ModelRequest{
		Model: "up-other", System: "step zero", Messages: r.Messages,
		Tools:           []engine.ToolInfo{echoTool("A").ToolInfo, extra.ToolInfo},
		ToolChoice:      &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: "A"},
		MaxOutputTokens: ptr(100), Temperature: ptr(0.5), TopP: ptr(0.9), TopK: ptr(40),
		PresencePenalty: ptr(0.2), FrequencyPenalty: ptr(0.3), StopSequences: []string{"END"}, Seed: ptr(int64(7)),
		Headers:         map[string]string{"x-a": "1", "x-b": "2"},
		ProviderOptions: map[string]any{"openai": map[string]any{"user": "u"}, "anthropic": true},
		SendReasoning:   false,
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("request 0\n got %+v\nwant %+v", r, want)
	}
	// Step overrides apply to that step only.
	if reqs[1].System != "be precise" || reqs[1].ToolChoice.Type != engine.ToolChoiceRequired || len(reqs[1].ProviderOptions) != 1 {
		t.Errorf("request 1 kept step 0 overrides: %+v", reqs[1])
	}
}

func TestReasoning(t *testing.T) {
	reasoning := []engine.StreamPart{
		{Type: engine.StreamReasoningStart, ID: "r1"},
		{Type: engine.StreamReasoningDelta, ID: "r1", Text: "thinking"},
		{Type: engine.StreamReasoningEnd, ID: "r1"},
	}
	for _, send := range []bool{true, false} {
		fake := newFake(step(reasoning, textParts("t1", "hi"), one(finish(engine.FinishStop, 1, 1))))
		h := newHarness(t, fake)
		h.req.Defaults.SendReasoning = &send
		res := h.run(context.Background())
		if got := strings.Contains(h.ev.text(), "reasoning-delta"); got != send {
			t.Errorf("sendReasoning %v: reasoning events %v", send, got)
		}
		if got := res.Message.Parts[1].Type == engine.PartReasoning; got != send {
			t.Errorf("sendReasoning %v: reasoning part %v", send, got)
		}
		if res.Steps[0].ReasoningText != "thinking" {
			t.Errorf("step reasoning %q", res.Steps[0].ReasoningText)
		}
	}
}

// TestToolsAdditiveSameNameReplaces: beforeTurn's tools are added to the
// agent's; one with an existing name replaces that tool in place (its
// description, schema and executor), as Think's {...tools, ...config.tools}.
func TestToolsAdditiveSameNameReplaces(t *testing.T) {
	fake := newFake(callStep(`A={"q":"x"}`), textStep("ok"))
	h := newHarness(t, fake, echoTool("A"), echoTool("B"))
	replacement := echoTool("A")
	replacement.Description = "the rule's A"
	replacement.Executor = engine.ExecutorFunc(func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
		return json.RawMessage(`"replaced"`), nil
	})
	h.rec.turn = func(*engine.TurnContext) (*engine.TurnConfig, error) {
		return &engine.TurnConfig{Tools: []engine.Tool{replacement, echoTool("C")}}, nil
	}
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted {
		t.Fatalf("status %s %q", res.Status, res.Error)
	}
	var offered []string
	for _, info := range fake.requests()[0].Tools {
		offered = append(offered, info.Name+":"+info.Description)
	}
	if want := []string{"A:the rule's A", "B:", "C:"}; !slices.Equal(offered, want) {
		t.Errorf("offered %q, want %q", offered, want)
	}
	if seen := toolResultsSeen(t, fake.requests()[1])[0]; string(seen.Output) != `"replaced"` {
		t.Errorf("model saw %s from A, want the replacement's output", seen.Output)
	}
}

// TestStepMessagesOverride: beforeStep's messages replace what that one
// step sends; the next step again sends the turn's accumulated messages.
func TestStepMessagesOverride(t *testing.T) {
	fake := newFake(callStep(`A={"q":"x"}`), callStep(`A={"q":"y"}`), textStep("ok"))
	h := newHarness(t, fake, echoTool("A"))
	pruned := []engine.ModelMessage{{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentText, Text: "pruned"}}}}
	h.rec.stepCfg = func(sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
		if sc.StepNumber == 1 {
			return &engine.StepConfig{Messages: &pruned}, nil
		}
		return nil, nil
	}
	if res := h.run(context.Background()); res.Status != engine.StatusCompleted {
		t.Fatalf("status %s %q", res.Status, res.Error)
	}
	reqs := fake.requests()
	if !reflect.DeepEqual(reqs[1].Messages, pruned) {
		t.Errorf("step 1 sent %+v, want the override", reqs[1].Messages)
	}
	// user, then (assistant call, tool result) for each of steps 0 and 1.
	if n := len(reqs[2].Messages); n != 5 || reqs[2].Messages[0].Text() != "hi" {
		t.Errorf("step 2 sent %d messages starting %+v", n, reqs[2].Messages[0])
	}
}

// TestRequestToolChoice: a request's forcing tool choice binds the turn's
// first step only, "none" every step, and the agent's or a rule's choice
// wins over it.
func TestRequestToolChoice(t *testing.T) {
	forced := &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: "A"}
	none := &engine.ToolChoice{Type: engine.ToolChoiceNone}
	for _, tt := range []struct {
		name     string
		request  *engine.ToolChoice
		defaults *engine.ToolChoice
		want     [2]*engine.ToolChoice
	}{
		{"forced: first step only", forced, nil, [2]*engine.ToolChoice{forced, nil}},
		{"none: every step", none, nil, [2]*engine.ToolChoice{none, none}},
		{"the agent's choice wins", forced, none, [2]*engine.ToolChoice{none, none}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFake(callStep(`A={"q":"1"}`), textStep("done"))
			h := newHarness(t, fake, echoTool("A"))
			h.req.RequestToolChoice, h.req.Defaults.ToolChoice = tt.request, tt.defaults
			if res := h.run(context.Background()); res.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			reqs := fake.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want 2", len(reqs))
			}
			for i, want := range tt.want {
				if got := reqs[i].ToolChoice; (got == nil) != (want == nil) || got != nil && *got != *want {
					t.Errorf("step %d: tool choice %+v, want %+v", i, got, want)
				}
			}
		})
	}
}
