package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

// toolResultsSeen returns the tool results of the last tool message of a
// model request: what the model saw as each tool's output.
func toolResultsSeen(t *testing.T, req *engine.ModelRequest) []engine.ContentPart {
	t.Helper()
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == engine.RoleTool {
			return req.Messages[i].Content
		}
	}
	t.Fatalf("request has no tool message: %+v", req.Messages)
	return nil
}

func TestParallelCallsPolicyInOrderExecutedConcurrently(t *testing.T) {
	var running atomic.Int32
	bothIn := make(chan struct{})
	bDone := make(chan struct{})
	barrier := func(name string) engine.ExecutorFunc {
		return func(ctx context.Context, c engine.ToolExecution) (json.RawMessage, error) {
			if running.Add(1) == 2 {
				close(bothIn)
			}
			// Both calls must be running at once: a serial engine deadlocks here.
			select {
			case <-bothIn:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if name == "A" {
				<-bDone // A finishes after B, yet is reported first
			} else {
				defer close(bDone)
			}
			return json.RawMessage(`"` + name + `"`), nil
		}
	}
	a, b := echoTool("A"), echoTool("B")
	a.Executor, b.Executor = barrier("A"), barrier("B")
	fake := newFake(callStep(`A={"q":"1"}`, `B={"q":"2"}`), textStep("ok"))
	h := newHarness(t, fake)
	h.req.Tools = []engine.Tool{logged(h.rec, a), logged(h.rec, b)}
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted {
		t.Fatalf("status %s: %s", res.Status, res.Error)
	}
	// Both executions start after both policy decisions, in either order.
	got := h.rec.sequence()
	executes := slices.IndexFunc(got, func(s string) bool { return strings.HasPrefix(s, "execute ") })
	if executes != 5 || !slices.Contains(got[5:7], "execute A") || !slices.Contains(got[5:7], "execute B") {
		t.Errorf("executions not after both beforeToolCall: %q", got)
	}
	got = slices.DeleteFunc(got, func(s string) bool { return strings.HasPrefix(s, "execute ") })
	want := []string{"beforeTurn", "beforeStep 0", "onChunk…", "beforeToolCall A", "beforeToolCall B",
		"afterToolCall A", "afterToolCall B", "onStepFinish 0", "beforeStep 1", "onChunk…", "onStepFinish 1", "onChatResponse completed"}
	if !slices.Equal(got, want) {
		t.Errorf("sequence\n got %q\nwant %q", got, want)
	}
	seen := toolResultsSeen(t, fake.requests()[1])
	if len(seen) != 2 || string(seen[0].Output) != `"A"` || string(seen[1].Output) != `"B"` {
		t.Errorf("model saw %+v, want A then B", seen)
	}
	// B's earlier call is visible to policy for the later call.
	if prev := h.rec.calls[1].PreviousCalls; len(prev) != 1 || prev[0].ToolName != "A" || prev[0].Decision != engine.DecisionAllow {
		t.Errorf("PreviousCalls of B = %+v", prev)
	}
}

func TestToolCallDecisions(t *testing.T) {
	const modelInput = `{"q":"model"}`
	tests := []struct {
		name     string
		decision *engine.ToolCallDecision
		err      error
		// want: what afterToolCall records and what the model saw next.
		decisionName string
		executed     bool
		success      bool
		effective    string
		modelSaw     string
		isError      bool
		// afterErr prefixes the raw error afterToolCall records: a policy
		// failure's details stay server-side, the model sees a fixed text.
		afterErr string
	}{
		{name: "void", decisionName: engine.DecisionAllow, executed: true, success: true, effective: modelInput,
			modelSaw: `{"tool":"A","input":{"q":"model"}}`},
		{name: "allow", decision: &engine.ToolCallDecision{Action: engine.ActionAllow}, decisionName: engine.DecisionAllow,
			executed: true, success: true, effective: modelInput, modelSaw: `{"tool":"A","input":{"q":"model"}}`},
		{name: "allow with input", decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"q":"policy"}`)},
			decisionName: engine.DecisionRewrite, executed: true, success: true, effective: `{"q":"policy"}`,
			modelSaw: `{"tool":"A","input":{"q":"policy"}}`},
		{name: "allow with invalid input", decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"q":1}`)},
			decisionName: engine.DecisionError, modelSaw: `"Tool \"A\" was refused: its policy could not be evaluated."`, afterErr: `beforeToolCall rewrote the input of tool "A" into an invalid input:`, isError: true},
		{name: "block with reason", decision: &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "read-only mode"},
			decisionName: engine.DecisionBlock, success: true, modelSaw: `"read-only mode"`},
		{name: "block without reason", decision: &engine.ToolCallDecision{Action: engine.ActionBlock},
			decisionName: engine.DecisionBlock, success: true, modelSaw: `"Tool \"A\" was blocked by beforeToolCall."`},
		{name: "substitute", decision: &engine.ToolCallDecision{Action: engine.ActionSubstitute, Output: json.RawMessage(`{"cached":true}`), Input: json.RawMessage(`{"q":"cache"}`)},
			decisionName: engine.DecisionSubstitute, success: true, effective: `{"q":"cache"}`, modelSaw: `{"cached":true}`},
		{name: "hook error", err: errors.New("rego: conflict"),
			decisionName: engine.DecisionError, modelSaw: `"Tool \"A\" was refused: its policy could not be evaluated."`, afterErr: "beforeToolCall: rego: conflict", isError: true},
		{name: "unknown action", decision: &engine.ToolCallDecision{Action: "maybe"},
			decisionName: engine.DecisionError, modelSaw: `"Tool \"A\" was refused: its policy could not be evaluated."`, afterErr: `beforeToolCall returned unknown action "maybe"`, isError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Int32
			tool := echoTool("A")
			inner := tool.Executor
			tool.Executor = engine.ExecutorFunc(func(ctx context.Context, c engine.ToolExecution) (json.RawMessage, error) {
				ran.Add(1)
				return inner.Execute(ctx, c)
			})
			fake := newFake(callStep("A="+modelInput), textStep("ok"))
			h := newHarness(t, fake, tool)
			h.rec.decide = func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) { return tt.decision, tt.err }
			res := h.run(context.Background())
			if res.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			if got := ran.Load() == 1; got != tt.executed {
				t.Errorf("executed = %v, want %v", got, tt.executed)
			}
			if len(h.rec.after) != 1 {
				t.Fatalf("afterToolCall fired %d times", len(h.rec.after))
			}
			rc := h.rec.after[0]
			if rc.Decision != tt.decisionName || rc.Executed != tt.executed || rc.Success != tt.success {
				t.Errorf("afterToolCall = decision %s executed %v success %v", rc.Decision, rc.Executed, rc.Success)
			}
			if string(rc.Input) != modelInput || string(rc.EffectiveInput) != tt.effective {
				t.Errorf("afterToolCall input %s effective %s, want %s / %s", rc.Input, rc.EffectiveInput, modelInput, tt.effective)
			}
			if tt.success && string(rc.Output) != tt.modelSaw {
				t.Errorf("afterToolCall output %s, want %s", rc.Output, tt.modelSaw)
			}
			if !tt.success && (rc.Error == "" || !strings.HasPrefix(rc.Error, tt.afterErr)) {
				t.Errorf("afterToolCall error %q, want prefix %q", rc.Error, tt.afterErr)
			}
			seen := toolResultsSeen(t, fake.requests()[1])[0]
			if seen.IsError != tt.isError || !strings.HasPrefix(string(seen.Output), tt.modelSaw) {
				t.Errorf("model saw %s (isError %v), want prefix %s (isError %v)", seen.Output, seen.IsError, tt.modelSaw, tt.isError)
			}
			part := res.Message.Parts[1]
			if wantState := map[bool]string{true: engine.ToolStateOutputAvailable, false: engine.ToolStateOutputError}[tt.success]; part.State != wantState {
				t.Errorf("part state %s, want %s", part.State, wantState)
			}
		})
	}
}

func TestPolicyErrorConsultsOnChatError(t *testing.T) {
	fake := newFake(callStep(`A={"q":"x"}`), textStep("ok"))
	h := newHarness(t, fake, echoTool("A"))
	h.rec.decide = func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) {
		return nil, errors.New("secret rule text")
	}
	h.rec.chatErr = func(*engine.ChatErrorContext) error { return errors.New("policy unavailable") }
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted {
		t.Fatalf("status %s", res.Status)
	}
	if len(h.rec.errs) != 1 || h.rec.errs[0].Stage != engine.StagePolicy {
		t.Fatalf("onChatError calls %+v", h.rec.errs)
	}
	seen := toolResultsSeen(t, fake.requests()[1])[0]
	if string(seen.Output) != `"policy unavailable"` {
		t.Errorf("model saw %s", seen.Output)
	}
}

func TestInvalidCallsNeverExecute(t *testing.T) {
	tests := []struct {
		name   string
		call   string
		active []string
		// step limits the tools through beforeStep instead of beforeTurn.
		step bool
		want string
	}{
		{name: "schema violation", call: `A={"q":42}`, want: `Invalid input for tool \"A\"`},
		{name: "extra property", call: `A={"q":"x","rm":true}`, want: `Invalid input for tool \"A\"`},
		{name: "not JSON", call: `A={"q":`, want: `the input is not valid JSON`},
		{name: "unknown tool", call: `Z={"q":"x"}`, want: `unavailable tool \"Z\"`},
		{name: "inactive tool", call: `A={"q":"x"}`, active: []string{"B"}, want: `unavailable tool \"A\"`},
		{name: "inactive in this step", call: `A={"q":"x"}`, active: []string{"B"}, step: true, want: `unavailable tool \"A\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran atomic.Int32
			a := echoTool("A")
			a.Executor = engine.ExecutorFunc(func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
				ran.Add(1)
				return nil, nil
			})
			fake := newFake(callStep(tt.call), textStep("ok"))
			h := newHarness(t, fake, a, echoTool("B"))
			switch {
			case tt.step:
				h.rec.stepCfg = func(sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
					if sc.StepNumber == 0 {
						return &engine.StepConfig{ActiveTools: &tt.active}, nil
					}
					return nil, nil
				}
			case tt.active != nil:
				h.rec.turn = func(*engine.TurnContext) (*engine.TurnConfig, error) {
					return &engine.TurnConfig{ActiveTools: &tt.active}, nil
				}
			}
			res := h.run(context.Background())
			if res.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			if ran.Load() != 0 {
				t.Fatal("tool executed")
			}
			if len(h.rec.calls) != 0 {
				t.Error("beforeToolCall consulted for an invalid call")
			}
			seen := toolResultsSeen(t, fake.requests()[1])[0]
			if !seen.IsError || !strings.Contains(string(seen.Output), tt.want) {
				t.Errorf("model saw %s, want an error containing %s", seen.Output, tt.want)
			}
			if !strings.Contains(h.ev.text(), `"type":"tool-input-error"`) {
				t.Error("no tool-input-error event")
			}
			if len(h.rec.after) != 1 || h.rec.after[0].Decision != engine.DecisionError || h.rec.after[0].Executed {
				t.Errorf("afterToolCall %+v", h.rec.after)
			}
			if tt.active != nil {
				for _, info := range fake.requests()[0].Tools {
					if info.Name == "A" {
						t.Error("inactive tool offered to the model")
					}
				}
			}
		})
	}
}

// TestToolFailuresBecomeToolErrors: a failing tool is a tool error the
// turn goes on from. The model and the client see a generic text (or the
// engine's own, for a timeout or an output that is not JSON), never the
// tool's error, which names backend internals (issue 28 finding 8);
// afterToolCall and onChatError keep it.
func TestToolFailuresBecomeToolErrors(t *testing.T) {
	tests := []struct {
		name   string
		exec   engine.ExecutorFunc
		want   string // what the model and the client see
		detail string // what afterToolCall gets
	}{
		{name: "error", exec: func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
			return nil, errors.New("disk full")
		}, want: `"Tool \"A\" failed."`, detail: "disk full"},
		{name: "transport error", exec: func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
			return nil, errors.New("http tool A: Post request failed: dial tcp 127.0.0.1:1: connect: connection refused")
		}, want: `"Tool \"A\" failed."`, detail: "http tool A: Post request failed: dial tcp 127.0.0.1:1: connect: connection refused"},
		{name: "public error", exec: func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
			return nil, engine.PublicError("the order service is closed on Sundays", errors.New("dial tcp 10.0.0.7:443: i/o timeout"))
		}, want: `"the order service is closed on Sundays"`, detail: "the order service is closed on Sundays"},
		{name: "panic", exec: func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
			panic("nil map")
		}, want: `"Tool \"A\" failed."`, detail: `tool "A" panicked: nil map`},
		{name: "timeout", exec: func(ctx context.Context, _ engine.ToolExecution) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, want: `"tool \"A\" timed out after 1ms"`, detail: `tool "A" timed out after 1ms`},
		{name: "invalid JSON", exec: func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
			return json.RawMessage(`{oops`), nil
		}, want: `"tool \"A\" returned invalid JSON"`, detail: `tool "A" returned invalid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := echoTool("A")
			a.Executor, a.Timeout = tt.exec, time.Hour
			if tt.name == "timeout" {
				a.Timeout = time.Millisecond
			}
			fake := newFake(callStep(`A={"q":"x"}`), textStep("ok"))
			h := newHarness(t, fake, a)
			res := h.run(context.Background())
			if res.Status != engine.StatusCompleted {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			seen := toolResultsSeen(t, fake.requests()[1])[0]
			if !seen.IsError || string(seen.Output) != tt.want {
				t.Errorf("model saw %s, want %s", seen.Output, tt.want)
			}
			if stream := h.ev.text(); !strings.Contains(stream, `"errorText":`+tt.want) ||
				(tt.detail != strings.Trim(tt.want, `"`) && strings.Contains(stream, tt.detail)) {
				t.Errorf("stream %s: want errorText %s and not %q", stream, tt.want, tt.detail)
			}
			rc := h.rec.after[0]
			if rc.Success || !rc.Executed || rc.Decision != engine.DecisionAllow || rc.Error != tt.detail {
				t.Errorf("afterToolCall %+v, want error %q", rc, tt.detail)
			}
			if len(h.rec.errs) != 1 || h.rec.errs[0].Stage != engine.StageTool || h.rec.errs[0].Message != tt.detail {
				t.Errorf("onChatError %+v", h.rec.errs)
			}
		})
	}
}

func TestToolOutputTruncatedAndRedacted(t *testing.T) {
	a := echoTool("A")
	a.MaxOutputBytes = 10
	a.Executor = engine.ExecutorFunc(func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
		return json.RawMessage(`"` + strings.Repeat("é", 20) + `"`), nil
	})
	b := echoTool("B")
	fake := newFake(callStep(`A={"q":"x"}`, `B={"q":"secret"}`), textStep("ok"))
	h := newHarness(t, fake, a, b)
	h.rec.result = func(rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
		if rc.ToolName == "B" {
			return &engine.ToolResultDecision{Output: json.RawMessage(`"[redacted]"`)}, nil
		}
		return nil, nil
	}
	h.run(context.Background())
	seen := toolResultsSeen(t, fake.requests()[1])
	var s string
	if err := json.Unmarshal(seen[0].Output, &s); err != nil {
		t.Fatalf("truncated output is not a JSON string: %s", seen[0].Output)
	}
	// A string output is cut as text (not re-quoted): 5 of 20 "é" fit in 10 bytes.
	if s != "ééééé…[truncated 30 bytes]" {
		t.Errorf("truncated output %q", s)
	}
	// The model sees the replacement; afterToolCall keeps the tool's own
	// output for audit and reports the replacement as modelOutput.
	after := h.rec.after[1]
	if string(seen[1].Output) != `"[redacted]"` || string(after.ModelOutput) != `"[redacted]"` || !strings.Contains(string(after.Output), "secret") {
		t.Errorf("redacted output: model %s, afterToolCall output %s modelOutput %s", seen[1].Output, after.Output, after.ModelOutput)
	}
}

// secretClientResult runs a turn whose model calls the client tool, and
// returns its harness, ready for the next turn (fresh events, a toolResult
// rule redacting the token), and the turn's message with the client's
// result — a token — on its last part.
func secretClientResult(t *testing.T, client engine.Tool) (*harness, engine.UIMessage) {
	t.Helper()
	h := newHarness(t, newFake(callStep(`getLocation={}`), textStep("ok")), client)
	msg := h.run(context.Background()).Message
	msg.Parts = slices.Clone(msg.Parts)
	last := &msg.Parts[len(msg.Parts)-1]
	last.State, last.Output = engine.ToolStateOutputAvailable, json.RawMessage(`{"city":"Paris","token":"s3cret"}`)
	h.rec.result = func(rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
		return &engine.ToolResultDecision{Output: json.RawMessage(`{"city":"Paris","token":"[REDACTED]"}`)}, nil
	}
	h.ev = &events{}
	h.req.Emit = h.ev.emit
	return h, msg
}

// afterOf is the afterToolCall context of the call id (the last one), or nil.
func (r *recorder) afterOf(id string) *engine.ToolCallResultContext {
	var after *engine.ToolCallResultContext
	for i := range r.after {
		if r.after[i].ToolCallID == id {
			after = &r.after[i]
		}
	}
	return after
}

func TestClientTools(t *testing.T) {
	client := engine.Tool{ToolInfo: engine.ToolInfo{Name: "getLocation", Kind: engine.ToolKindClient}}
	t.Run("pending", func(t *testing.T) {
		fake := newFake(callStep(`getLocation={}`))
		h := newHarness(t, fake, client)
		res := h.run(context.Background())
		if res.Status != engine.StatusCompleted || res.FinishReason != engine.FinishToolCalls {
			t.Fatalf("status %s finish %s", res.Status, res.FinishReason)
		}
		if len(res.PendingToolCalls) != 1 || res.PendingToolCalls[0].ToolName != "getLocation" {
			t.Fatalf("pending %+v", res.PendingToolCalls)
		}
		if len(h.rec.after) != 0 || len(h.rec.calls) != 1 {
			t.Errorf("beforeToolCall %d, afterToolCall %d; want 1, 0", len(h.rec.calls), len(h.rec.after))
		}
		types := h.ev.types()
		if want := []string{"tool-input-available", "finish-step", "finish"}; !slices.Equal(types[len(types)-3:], want) {
			t.Errorf("events end %q", types)
		}
		if !strings.HasSuffix(h.ev.text(), `{"type":"finish","finishReason":"tool-calls"}`) {
			t.Errorf("finish: %s", h.ev.text())
		}
		if p := res.Message.Parts[len(res.Message.Parts)-1]; p.State != engine.ToolStateInputAvailable {
			t.Errorf("pending part state %s", p.State)
		}
	})
	t.Run("blocked", func(t *testing.T) {
		fake := newFake(callStep(`getLocation={}`), textStep("I cannot know where you are."))
		h := newHarness(t, fake, client)
		h.rec.decide = func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) {
			return &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "location is private"}, nil
		}
		res := h.run(context.Background())
		if res.Status != engine.StatusCompleted || res.FinishReason != engine.FinishStop || len(res.PendingToolCalls) != 0 {
			t.Fatalf("status %s finish %s pending %v", res.Status, res.FinishReason, res.PendingToolCalls)
		}
		if seen := toolResultsSeen(t, fake.requests()[1])[0]; string(seen.Output) != `"location is private"` {
			t.Errorf("model saw %s", seen.Output)
		}
		// The client is told not to run it: providerExecuted on both chunks.
		for _, l := range strings.Split(h.ev.text(), "\n") {
			if strings.Contains(l, `"tool-input-available"`) || strings.Contains(l, `"tool-output-available"`) {
				if !strings.Contains(l, `"providerExecuted":true`) {
					t.Errorf("chunk without providerExecuted: %s", l)
				}
			}
		}
	})
	t.Run("continuation with the client's result", func(t *testing.T) {
		fake := newFake(callStep(`getLocation={}`), textStep("You are in Paris."))
		h := newHarness(t, fake, client)
		first := h.run(context.Background())
		if len(first.PendingToolCalls) != 1 {
			t.Fatalf("pending %+v", first.PendingToolCalls)
		}
		// The client runs the tool; its result lands in the stored part.
		msg := first.Message
		msg.Parts = slices.Clone(msg.Parts)
		last := &msg.Parts[len(msg.Parts)-1]
		last.State, last.Output = engine.ToolStateOutputAvailable, json.RawMessage(`"Paris"`)
		var sawContinuation bool
		h.rec.turn = func(tc *engine.TurnContext) (*engine.TurnConfig, error) {
			sawContinuation = tc.Continuation
			return nil, nil
		}
		h.ev = &events{}
		h.req.Emit = h.ev.emit
		h.req.Messages = append(h.req.Messages, msg)
		h.req.Continuation, h.req.MessageID = true, ""
		res := h.run(context.Background())
		if res.Status != engine.StatusCompleted || res.FinishReason != engine.FinishStop || !res.Continuation || !sawContinuation {
			t.Fatalf("status %s finish %s continuation %v (beforeTurn saw %v)", res.Status, res.FinishReason, res.Continuation, sawContinuation)
		}
		if r := h.rec.resp[1]; !r.Continuation || r.Message.ID != first.Message.ID {
			t.Errorf("onChatResponse continuation %v id %s", r.Continuation, r.Message.ID)
		}
		if seen := toolResultsSeen(t, fake.requests()[1])[0]; seen.ToolCallID != first.PendingToolCalls[0].ToolCallID || string(seen.Output) != `"Paris"` {
			t.Errorf("model saw %+v", seen)
		}
		if res.Message.ID != first.Message.ID || len(res.Message.Parts) != len(msg.Parts)+2 || res.Message.Parts[len(res.Message.Parts)-1].Text != "You are in Paris." {
			t.Errorf("continued message %+v", res.Message)
		}
		if !strings.HasPrefix(h.ev.text(), `{"type":"start","messageId":"`+first.Message.ID+`"}`) {
			t.Errorf("continuation stream starts %s", h.ev.text())
		}
	})
	t.Run("client result passes the toolResult hook and afterToolCall", func(t *testing.T) {
		h, msg := secretClientResult(t, client)
		fake, last := h.fake, &msg.Parts[len(msg.Parts)-1]
		h.req.Messages = append(h.req.Messages, msg)
		h.req.Continuation, h.req.MessageID = true, ""
		h.req.ClientToolResults = []string{last.ToolCallID}
		res := h.run(context.Background())
		if seen := toolResultsSeen(t, fake.requests()[1])[0]; strings.Contains(string(seen.Output), "s3cret") {
			t.Errorf("model saw the client's secret: %s", seen.Output)
		}
		if p := res.Message.Parts[len(msg.Parts)-1]; strings.Contains(string(p.Output), "s3cret") {
			t.Errorf("persisted part keeps the secret: %s", p.Output)
		}
		if !strings.Contains(h.ev.text(), `"token":"[REDACTED]"`) {
			t.Errorf("stream does not re-emit the redacted output: %s", h.ev.text())
		}
		after := h.rec.afterOf(last.ToolCallID)
		if after == nil || after.Decision != engine.DecisionClient || !after.Success || !strings.Contains(string(after.Output), "s3cret") || strings.Contains(string(after.ModelOutput), "s3cret") {
			t.Errorf("afterToolCall for the client result: %+v", after)
		}
	})
	t.Run("client result in a stateless history passes the toolResult hook and afterToolCall", func(t *testing.T) {
		// The client sends the whole history: the call with its result,
		// then a user message; the turn is not a continuation.
		h, msg := secretClientResult(t, client)
		fake, last := h.fake, &msg.Parts[len(msg.Parts)-1]
		sent := append(slices.Clone(h.req.Messages), msg, engine.UIMessage{ID: "u2", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: "and?"}}})
		h.req.Messages, h.req.MessageID = sent, ""
		h.req.ClientToolResults = []string{last.ToolCallID}
		res := h.run(context.Background())
		if seen := toolResultsSeen(t, fake.requests()[1])[0]; strings.Contains(string(seen.Output), "s3cret") || !strings.Contains(string(seen.Output), "[REDACTED]") {
			t.Errorf("model saw %s", seen.Output)
		}
		if res.Continuation || res.Message.ID == msg.ID || strings.Contains(h.ev.text(), "s3cret") || strings.Contains(h.ev.text(), last.ToolCallID) {
			t.Errorf("a new message (%s, continuation %v) whose stream names no history call: %s", res.Message.ID, res.Continuation, h.ev.text())
		}
		if p := sent[len(sent)-2].Parts[len(msg.Parts)-1]; !strings.Contains(string(p.Output), "s3cret") {
			t.Errorf("the request's history was changed: %s", p.Output)
		}
		after := h.rec.afterOf(last.ToolCallID)
		if after == nil || after.Decision != engine.DecisionClient || !after.Success || strings.Contains(string(after.ModelOutput), "s3cret") {
			t.Errorf("afterToolCall for the client result: %+v", after)
		}
	})
	t.Run("server and client call in one step", func(t *testing.T) {
		fake := newFake(callStep(`A={"q":"x"}`, `getLocation={}`))
		h := newHarness(t, fake, echoTool("A"), client)
		res := h.run(context.Background())
		if res.Status != engine.StatusCompleted || res.FinishReason != engine.FinishToolCalls || len(fake.requests()) != 1 {
			t.Fatalf("status %s finish %s requests %d", res.Status, res.FinishReason, len(fake.requests()))
		}
		if len(res.PendingToolCalls) != 1 || res.PendingToolCalls[0].ToolName != "getLocation" {
			t.Errorf("pending %+v", res.PendingToolCalls)
		}
		if r := res.Steps[0].ToolResults; len(r) != 1 || r[0].ToolName != "A" {
			t.Errorf("step results %+v, want A's only", r)
		}
		states := []string{res.Message.Parts[1].State, res.Message.Parts[2].State}
		if !slices.Equal(states, []string{engine.ToolStateOutputAvailable, engine.ToolStateInputAvailable}) {
			t.Errorf("part states %q", states)
		}
	})
	t.Run("rewritten input goes to the client", func(t *testing.T) {
		withSchema := client
		withSchema.InputSchema = json.RawMessage(`{"type":"object","properties":{"precise":{"type":"boolean"}}}`)
		fake := newFake(callStep(`getLocation={"precise":true}`))
		h := newHarness(t, fake, withSchema)
		h.rec.decide = func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) {
			return &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"precise":false}`)}, nil
		}
		res := h.run(context.Background())
		if len(res.PendingToolCalls) != 1 || string(res.PendingToolCalls[0].Input) != `{"precise":false}` {
			t.Fatalf("pending %+v", res.PendingToolCalls)
		}
		if !strings.Contains(h.ev.text(), `"input":{"precise":false}`) {
			t.Errorf("client not given the rewritten input: %s", h.ev.text())
		}
	})
}

func TestToolErrorsKeepTurnGoing(t *testing.T) {
	fake := newFake(callStep(`A={"q":"x"}`), textStep("sorry"))
	h := newHarness(t, fake, echoTool("A"))
	h.rec.decide = func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) { panic("rule engine crashed") }
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted || len(res.Steps) != 2 {
		t.Fatalf("status %s steps %d", res.Status, len(res.Steps))
	}
	if rc := h.rec.after[0]; rc.Success || rc.Decision != engine.DecisionError || !strings.Contains(rc.Error, "panicked") {
		t.Errorf("afterToolCall %+v", rc)
	}
}

// FuzzToolCallInput streams a tool call with arbitrary argument bytes, as a
// broken or hostile model might send them: the turn must complete, the
// tool must only ever run with input that passed its schema, and every
// event, hook context and the result must serialise.
func FuzzToolCallInput(f *testing.F) {
	for _, seed := range []string{`{"q":"x"}`, `{"q":`, ``, `"text"`, `null`, `[1,2]`, `{"q":"x","rm":true}`, "{\"q\":\"\xff\"}", "\x00"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		var bad atomic.Int32
		a := echoTool("A")
		a.Executor = engine.ExecutorFunc(func(_ context.Context, c engine.ToolExecution) (json.RawMessage, error) {
			var v struct{ Q string }
			if json.Unmarshal(c.Input, &v) != nil {
				bad.Add(1)
			}
			return json.RawMessage(`"ok"`), nil
		})
		fake := newFake(step(callParts("c1", "A", string(input)), one(finish(engine.FinishToolCalls, 1, 1))), textStep("done"))
		h := newHarness(t, fake, a)
		h.rec.onChunk = func(c *engine.ChunkContext) {
			if _, err := json.Marshal(c); err != nil {
				t.Errorf("onChunk context does not serialise: %v", err)
			}
		}
		res := h.run(context.Background()) // events.emit fails the test on an unencodable event
		if res.Status != engine.StatusCompleted || len(res.Steps) != 2 {
			t.Fatalf("status %s, %d steps, error %q", res.Status, len(res.Steps), res.Error)
		}
		if bad.Load() != 0 {
			t.Fatalf("tool ran with input %q", input)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Fatalf("result does not serialise: %v", err)
		}
		if _, err := json.Marshal(fake.requests()[1].Messages); err != nil {
			t.Fatalf("next model request does not serialise: %v", err)
		}
	})
}
