package engine_test

import (
	"context"
	"slices"
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
