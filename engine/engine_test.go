package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
)

// TestExecutionOrderTwoToolCalls records the hook sequence of a turn with
// two tool calls in two steps and compares it with the reference's
// "Execution Order" (think-lifecycle-hooks.md; think-implementation.md
// §2.14): step 0 calls A, step 1 calls B, step 2 answers.
func TestExecutionOrderTwoToolCalls(t *testing.T) {
	fake := newFake(callStep(`A={"q":"a"}`), callStep(`B={"q":"b"}`), textStep("done"))
	h := newHarness(t, fake)
	h.req.Tools = []engine.Tool{logged(h.rec, echoTool("A")), logged(h.rec, echoTool("B"))}
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted {
		t.Fatalf("status = %s (%s)", res.Status, res.Error)
	}
	want := []string{
		"beforeTurn",
		"beforeStep 0", "onChunk…", "beforeToolCall A", "execute A", "afterToolCall A", "onStepFinish 0",
		"beforeStep 1", "onChunk…", "beforeToolCall B", "execute B", "afterToolCall B", "onStepFinish 1",
		"beforeStep 2", "onChunk…", "onStepFinish 2",
		"onChatResponse completed",
	}
	if got := h.rec.sequence(); !slices.Equal(got, want) {
		t.Errorf("hook sequence:\n got %q\nwant %q", got, want)
	}
	// Every hook context carries the turn's identity and step number.
	if c := h.rec.calls[1]; c.RequestID != "req1" || c.SessionID != "s1" || c.StepNumber != 1 || c.EntryPath != engine.EntryChat {
		t.Errorf("beforeToolCall B context %+v", c.Identity)
	}
	if a := h.rec.after[1]; a.RequestID != "req1" || a.StepNumber != 1 || a.Tool.Name != "B" {
		t.Errorf("afterToolCall B context %+v", a)
	}
	if s := h.rec.steps[2]; s.Agent != "a" || s.StepNumber != 2 || s.Text != "done" || s.Usage.TotalTokens != 15 {
		t.Errorf("step 2 %+v", s)
	}
	if r := h.rec.resp[0]; r.RequestID != "req1" || r.Steps != 3 || r.Usage.TotalTokens != 45 || r.Message.ID != "msg_assistant_1" || r.FinishReason != engine.FinishStop {
		t.Errorf("onChatResponse %+v", r)
	}
	if res.Usage.TotalTokens != 45 || len(res.Message.Parts) != 6 {
		t.Errorf("result usage %+v parts %+v", res.Usage, res.Message.Parts)
	}
}

// identities records the Identity (and step number, where there is one)
// of every hook context.
type identities struct {
	engine.NopHooks
	mu   sync.Mutex
	seen map[string]engine.Identity
	step map[string]int
}

func (h *identities) saw(hook string, id engine.Identity, step int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[hook], h.step[hook] = id, step
}

func (h *identities) BeforeTurn(_ context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	h.saw("beforeTurn", tc.Identity, -1)
	return nil, nil
}

func (h *identities) BeforeStep(_ context.Context, sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
	h.saw("beforeStep", sc.Identity, sc.StepNumber)
	return nil, nil
}

func (h *identities) BeforeToolCall(_ context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	h.saw("beforeToolCall", tc.Identity, tc.StepNumber)
	return nil, nil
}

func (h *identities) ToolResult(_ context.Context, rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
	h.saw("toolResult", rc.Identity, rc.StepNumber)
	return nil, nil
}

func (h *identities) AfterToolCall(_ context.Context, rc *engine.ToolCallResultContext) {
	h.saw("afterToolCall", rc.Identity, rc.StepNumber)
}

func (h *identities) OnStepFinish(_ context.Context, s *engine.StepResult) {
	h.saw("onStepFinish", s.Identity, s.StepNumber)
}

func (h *identities) OnChunk(_ context.Context, c *engine.ChunkContext) {
	h.saw("onChunk", c.Identity, c.StepNumber)
}

func (h *identities) OnChatResponse(_ context.Context, r *engine.ChatResponseResult) {
	h.saw("onChatResponse", r.Identity, -1)
}

func (h *identities) OnChatError(_ context.Context, e *engine.ChatErrorContext) error {
	h.saw("onChatError", e.Identity, -1)
	return nil
}

// TestEveryHookCarriesTheTurnIdentity: request id, session id, agent,
// principal and entry path reach every hook context (Think leaves them
// out), and the step number reaches every step-scoped one.
func TestEveryHookCarriesTheTurnIdentity(t *testing.T) {
	a, b := echoTool("A"), echoTool("B")
	b.Executor = engine.ExecutorFunc(func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
		return nil, errors.New("down") // a tool error: onChatError fires
	})
	fake := newFake(callStep(`A={"q":"x"}`, `B={"q":"y"}`), textStep("ok"))
	h := newHarness(t, fake, a, b)
	h.req.Identity = engine.Identity{RequestID: "req-9", SessionID: "sess-3", Agent: "support", EntryPath: engine.EntrySubmitMessages,
		Principal: engine.Principal{Tenant: "acme", Subject: "alice", Roles: []string{"admin"}}}
	rec := &identities{seen: map[string]engine.Identity{}, step: map[string]int{}}
	h.req.Hooks = rec
	if res := h.run(context.Background()); res.Status != engine.StatusCompleted {
		t.Fatalf("status %s %q", res.Status, res.Error)
	}
	hooks := []string{"beforeTurn", "beforeStep", "beforeToolCall", "toolResult", "afterToolCall", "onStepFinish", "onChunk", "onChatResponse", "onChatError"}
	for _, hook := range hooks {
		id, ok := rec.seen[hook]
		if !ok {
			t.Errorf("%s never fired", hook)
			continue
		}
		if !reflect.DeepEqual(id, h.req.Identity) {
			t.Errorf("%s saw identity %+v", hook, id)
		}
	}
	// The last firing of each step-scoped hook: step 1 for the answer, step 0 for tools.
	wantStep := map[string]int{"beforeStep": 1, "onStepFinish": 1, "onChunk": 1, "beforeToolCall": 0, "toolResult": 0, "afterToolCall": 0}
	for hook, want := range wantStep {
		if rec.step[hook] != want {
			t.Errorf("%s last saw stepNumber %d, want %d", hook, rec.step[hook], want)
		}
	}
}
