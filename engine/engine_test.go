package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/turngate/turngate/engine"
)

func TestExecutionOrderTwoToolCalls(t *testing.T) {
	fake := newFake(callStep(`A={"q":"a"}`), callStep(`B={"q":"b"}`), textStep("done"))
	h := newHarness(t, fake, echoTool("A"), echoTool("B"))
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted {
		t.Fatalf("status = %s (%s)", res.Status, res.Error)
	}
	want := []string{
		"beforeTurn",
		"beforeStep 0", "onChunk…", "beforeToolCall A", "afterToolCall A", "onStepFinish 0",
		"beforeStep 1", "onChunk…", "beforeToolCall B", "afterToolCall B", "onStepFinish 1",
		"beforeStep 2", "onChunk…", "onStepFinish 2",
		"onChatResponse completed",
	}
	if got := h.rec.sequence(); !slices.Equal(got, want) {
		t.Errorf("hook sequence:\n got %q\nwant %q", got, want)
	}
	t.Log(h.ev.text())
}
