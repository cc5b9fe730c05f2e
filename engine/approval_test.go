package engine_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
)

// askApproval holds every call of tool A for the chat user's approval,
// patching its input.
func askApproval(tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	if tc.ToolName != "A" {
		return nil, nil
	}
	return &engine.ToolCallDecision{Action: engine.ActionApproval, Input: json.RawMessage(`{"q":"patched"}`),
		Approvals: []engine.ApprovalReason{{Reason: "A writes"}, {Reason: "A is costly", Approvers: []string{"role:ops"}}}}, nil
}

// requestApproval runs the first turn: A is held, B runs.
func requestApproval(t *testing.T) (*engine.TurnResult, *harness) {
	t.Helper()
	fake := newFake(callStep(`A={"q":"1"}`, `B={"q":"2"}`), textStep("done"))
	h := newHarness(t, fake)
	h.req.Tools = []engine.Tool{logged(h.rec, echoTool("A")), logged(h.rec, echoTool("B"))}
	h.rec.decide = askApproval
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted || res.FinishReason != engine.FinishToolCalls {
		t.Fatalf("status %s finish %s: %s", res.Status, res.FinishReason, res.Error)
	}
	if len(fake.requests()) != 1 {
		t.Fatalf("%d model requests, want 1: the turn ends while A waits", len(fake.requests()))
	}
	if slices.Contains(h.rec.sequence(), "execute A") || !slices.Contains(h.rec.sequence(), "execute B") {
		t.Fatalf("sequence %q: A must wait, B run", h.rec.sequence())
	}
	if len(res.PendingApprovals) != 1 {
		t.Fatalf("pending approvals %+v", res.PendingApprovals)
	}
	p := res.PendingApprovals[0]
	if p.ToolCallID != "call_0_A" || string(p.Input) != `{"q":"patched"}` || p.Reason() != "A writes; A is costly" ||
		!slices.Equal(p.Approvers(), []string{"role:ops"}) || !strings.HasPrefix(p.ApprovalID, "appr_") {
		t.Errorf("pending approval %+v", p)
	}
	want := []string{"start", "start-step", "tool-input-start", "tool-input-delta", "tool-input-start", "tool-input-delta",
		"tool-input-available", "tool-approval-request", "tool-input-available", "tool-output-available", "finish-step", "finish"}
	if got := h.ev.types(); !slices.Equal(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
	if !strings.Contains(h.ev.text(), `{"type":"tool-approval-request","approvalId":"`+p.ApprovalID+`","toolCallId":"call_0_A","reason":"A writes; A is costly"}`) {
		t.Errorf("no approval request chunk in\n%s", h.ev.text())
	}
	part := res.Message.Parts[1]
	if part.State != engine.ToolStateApprovalRequested || part.Approval == nil || part.Approval.ID != p.ApprovalID || string(part.Input) != `{"q":"1"}` {
		t.Errorf("part %+v", part)
	}
	return res, h
}

// continueWith runs the continuation of res's message with responses.
func continueWith(t *testing.T, res *engine.TurnResult, decide func(*engine.ToolCallContext) (*engine.ToolCallDecision, error), responses ...engine.ApprovalResponse) (*engine.TurnResult, *harness) {
	t.Helper()
	fake := newFake(textStep("after"))
	h := newHarness(t, fake)
	h.req.Tools = []engine.Tool{logged(h.rec, echoTool("A")), logged(h.rec, echoTool("B"))}
	h.rec.decide = decide
	h.req.Messages = []engine.UIMessage{userMsg("hi"), res.Message}
	h.req.Continuation, h.req.MessageID = true, res.Message.ID
	h.req.ApprovalResponses = responses
	out := h.run(context.Background())
	if out.Status != engine.StatusCompleted {
		t.Fatalf("continuation %s: %s", out.Status, out.Error)
	}
	return out, h
}

func TestApprovalApproved(t *testing.T) {
	res, _ := requestApproval(t)
	p := res.PendingApprovals[0]
	out, h := continueWith(t, res, askApproval, engine.ApprovalResponse{ApprovalID: p.ApprovalID, ToolCallID: p.ToolCallID, Approved: true, Reason: "fine", Input: p.Input})
	if got := h.ev.types(); !slices.Equal(got[:3], []string{"start", "tool-output-available", "start-step"}) {
		t.Errorf("events %q: the output must precede the next step", got)
	}
	part := out.Message.Parts[1]
	if part.State != engine.ToolStateOutputAvailable || part.Approval == nil || part.Approval.Approved == nil || !*part.Approval.Approved ||
		part.Approval.Reason != "fine" || !strings.Contains(string(part.Output), `"patched"`) {
		t.Errorf("part %+v", part)
	}
	if !slices.Contains(h.rec.sequence(), "execute A") {
		t.Errorf("A did not run: %q", h.rec.sequence())
	}
	seen := h.fake.requests()[0].Messages
	if !strings.Contains(string(mustJSON(t, seen)), `patched`) {
		t.Errorf("model did not see A's output: %s", mustJSON(t, seen))
	}
	if len(h.rec.after) != 1 || h.rec.after[0].Decision != engine.DecisionRewrite || !h.rec.after[0].Executed {
		t.Errorf("afterToolCall %+v", h.rec.after)
	}
}

func TestApprovalDenied(t *testing.T) {
	res, _ := requestApproval(t)
	p := res.PendingApprovals[0]
	out, h := continueWith(t, res, askApproval, engine.ApprovalResponse{ApprovalID: p.ApprovalID, ToolCallID: p.ToolCallID, Approved: false, Reason: "not today"})
	if got := h.ev.types(); !slices.Equal(got[:3], []string{"start", "tool-output-denied", "start-step"}) {
		t.Errorf("events %q", got)
	}
	part := out.Message.Parts[1]
	if part.State != engine.ToolStateOutputDenied || part.Approval == nil || *part.Approval.Approved || part.Approval.Reason != "not today" {
		t.Errorf("part %+v", part)
	}
	if slices.Contains(h.rec.sequence(), "execute A") || len(h.rec.calls) != 0 {
		t.Errorf("A ran or was evaluated: %q", h.rec.sequence())
	}
	want := engine.ApprovalDeniedText + " Reason: not today"
	if !strings.Contains(string(mustJSON(t, h.fake.requests()[0].Messages)), want) {
		t.Errorf("model did not see %q", want)
	}
	if len(h.rec.after) != 1 || h.rec.after[0].Decision != engine.DecisionDenied || h.rec.after[0].Error != want {
		t.Errorf("afterToolCall %+v", h.rec.after)
	}
}

// An approved call is evaluated again: a block that now applies wins, and
// an input that would now run differently is denied.
func TestApprovalReevaluated(t *testing.T) {
	res, _ := requestApproval(t)
	p := res.PendingApprovals[0]
	ok := engine.ApprovalResponse{ApprovalID: p.ApprovalID, ToolCallID: p.ToolCallID, Approved: true, Input: p.Input}
	block := func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) {
		return &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "frozen"}, nil
	}
	out, h := continueWith(t, res, block, ok)
	if part := out.Message.Parts[1]; part.State != engine.ToolStateOutputAvailable || string(part.Output) != `"frozen"` || slices.Contains(h.rec.sequence(), "execute A") {
		t.Errorf("block: part %+v, sequence %q", part, h.rec.sequence())
	}
	changed := func(tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
		d, _ := askApproval(tc)
		d.Input = json.RawMessage(`{"q":"other"}`)
		return d, nil
	}
	out, h = continueWith(t, res, changed, ok)
	if part := out.Message.Parts[1]; part.State != engine.ToolStateOutputDenied || !strings.Contains(part.Approval.Reason, "changed") || slices.Contains(h.rec.sequence(), "execute A") {
		t.Errorf("changed input: part %+v, sequence %q", part, h.rec.sequence())
	}
	// A response naming another approval id changes nothing.
	out, _ = continueWith(t, res, askApproval, engine.ApprovalResponse{ApprovalID: "appr_forged", ToolCallID: p.ToolCallID, Approved: true, Input: p.Input})
	if part := out.Message.Parts[1]; part.State != engine.ToolStateApprovalRequested {
		t.Errorf("forged id: part %+v", part)
	}
}

// A client tool cannot wait for approval: the call fails closed.
func TestApprovalOfClientToolFailsClosed(t *testing.T) {
	fake := newFake(callStep(`C={"q":"1"}`), textStep("done"))
	h := newHarness(t, fake)
	c := echoTool("C")
	c.Executor = nil
	h.req.Tools = []engine.Tool{c}
	h.rec.decide = func(*engine.ToolCallContext) (*engine.ToolCallDecision, error) {
		return &engine.ToolCallDecision{Action: engine.ActionApproval, Approvals: []engine.ApprovalReason{{Reason: "x"}}}, nil
	}
	res := h.run(context.Background())
	if len(res.PendingApprovals) != 0 || res.Message.Parts[1].State != engine.ToolStateOutputError {
		t.Errorf("result %+v", res)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
