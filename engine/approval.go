package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/google/uuid"
)

// Human approval of tool calls. beforeToolCall may answer ActionApproval:
// the call is then neither run nor refused but held. The engine announces
// it (tool-input-available, then tool-approval-request with a fresh
// approval id), leaves its part in state approval-requested and ends the
// turn with finishReason tool-calls once the step's other calls are
// settled, as for a pending client tool; TurnResult.PendingApprovals lists
// what waits. The decisions come back on a continuation of the same
// message (TurnRequest.ApprovalResponses, verified by the caller): before
// beforeTurn an approved call is evaluated again by beforeToolCall (a
// block or substitute that now applies wins, and an input that would now
// run differently is refused) and runs, a denied one is reported to the
// model as a tool error (ApprovalDeniedText), so the model's next step
// sees every outcome.

// Tool part states and the decision of a held call (protocols.md A.4, A.9).
const (
	ToolStateApprovalRequested = "approval-requested"
	ToolStateApprovalResponded = "approval-responded"
	ToolStateOutputDenied      = "output-denied"

	// DecisionApproval is a call held for approval (in the turn that asks).
	DecisionApproval = "approval"
	// DecisionDenied is a held call whose approval was denied or expired.
	DecisionDenied = "denied"
)

// ApprovalReason is one reason a call needs approval. Approvers empty
// means the chat user may approve; otherwise only principals holding one
// of the roles ("role:NAME") may.
type ApprovalReason struct {
	Reason    string   `json:"reason"`
	Approvers []string `json:"approvers,omitempty"`
}

// ToolApproval is a tool part's approval, as the AI SDK client keeps it.
type ToolApproval struct {
	ID string `json:"id"`
	// RequestReason is the reason the tool-approval-request carried.
	RequestReason string `json:"requestReason,omitempty"`
	// Approved is set once the approval is answered.
	Approved *bool `json:"approved,omitempty"`
	// Reason is the approver's reason.
	Reason string `json:"reason,omitempty"`
}

// PendingApproval is a tool call held for approval.
type PendingApproval struct {
	ApprovalID string `json:"approvalId"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	// Input is the input that would run (after patches); the tool part
	// keeps the model's input.
	Input      json.RawMessage  `json:"input"`
	Reasons    []ApprovalReason `json:"reasons"`
	StepNumber int              `json:"stepNumber"`
}

// Reason is the reasons joined, as the tool-approval-request carries them.
func (p *PendingApproval) Reason() string {
	rs := make([]string, len(p.Reasons))
	for i, r := range p.Reasons {
		rs[i] = r.Reason
	}
	return strings.Join(rs, "; ")
}

// Approvers returns the approver roles of every reason, or nil when the
// chat user may approve (no reason names approvers).
func (p *PendingApproval) Approvers() []string {
	var out []string
	for _, r := range p.Reasons {
		out = append(out, r.Approvers...)
	}
	return out
}

// ApprovalResponse is the verified decision on a pending approval.
type ApprovalResponse struct {
	ApprovalID string `json:"approvalId"`
	ToolCallID string `json:"toolCallId"`
	Approved   bool   `json:"approved"`
	// Reason is the approver's reason ("expired" for an expiry).
	Reason string `json:"reason,omitempty"`
	// Input is the input the approval was asked for; an approved call runs
	// only if beforeToolCall still yields it.
	Input json.RawMessage `json:"input,omitempty"`
}

// ApprovalDeniedText is what the model sees for a call whose approval was
// denied, followed by the approver's reason when there is one.
const ApprovalDeniedText = "This tool call was not approved, so it did not run."

// deniedText is the tool error the model sees for a denied call.
func deniedText(reason string) string {
	if reason == "" {
		return ApprovalDeniedText
	}
	return ApprovalDeniedText + " Reason: " + reason
}

// inputChangedReason denies an approved call whose policy now yields
// another input than the one approved.
const inputChangedReason = "the input that would run changed after the approval was requested"

// hold marks cs as held for approval by decision d; a client tool cannot
// be held (its client runs it), so that fails closed.
func (t *turn) hold(cs *callState, d *ToolCallDecision, step int) {
	name := cs.call.ToolName
	if len(d.Approvals) == 0 {
		cs.policyError(fmt.Errorf("beforeToolCall asked approval of tool %q without a reason", name))
		return
	}
	if cs.tool.Executor == nil {
		cs.policyError(fmt.Errorf("beforeToolCall asked approval of client tool %q: only server tools can wait for approval", name))
		return
	}
	input := cs.call.Input
	if len(d.Input) > 0 {
		if err := t.e.schemas.validate(cs.tool.InputSchema, d.Input); err != nil {
			cs.policyError(fmt.Errorf("beforeToolCall rewrote the input of tool %q into an invalid input: %w", name, err))
			return
		}
		input = d.Input
	}
	cs.decision, cs.effective = DecisionApproval, input
	cs.approval = &PendingApproval{
		ApprovalID: "appr_" + uuid.NewString(),
		ToolCallID: cs.call.ToolCallID,
		ToolName:   name,
		Input:      input,
		Reasons:    d.Approvals,
		StepNumber: step,
	}
}

// requestApproval puts the held call's part in approval-requested and
// asks the client.
func (t *turn) requestApproval(cs *callState, part *UIPart) {
	reason := cs.approval.Reason()
	part.State = ToolStateApprovalRequested
	part.Approval = &ToolApproval{ID: cs.approval.ApprovalID, RequestReason: reason}
	t.emit(Event{Type: EventToolApprovalRequest, ApprovalID: cs.approval.ApprovalID, ToolCallID: cs.call.ToolCallID, Reason: reason,
		Approvers: cs.approval.Approvers()})
}

// settleApprovals applies TurnRequest.ApprovalResponses to the continued
// message's parts awaiting approval, in part order; before is the history
// before the continued message.
func (t *turn) settleApprovals(ctx context.Context, before []UIMessage) {
	if len(t.req.ApprovalResponses) == 0 {
		return
	}
	msgs := ConvertToModelMessages(before)
	for i, step := range toolParts(t.msg.Parts) {
		part := &t.msg.Parts[i]
		if part.State != ToolStateApprovalRequested || part.Approval == nil {
			continue
		}
		for _, r := range t.req.ApprovalResponses {
			if r.ApprovalID == part.Approval.ID && r.ToolCallID == part.ToolCallID {
				t.settleApproval(ctx, i, r, step, msgs)
				break
			}
		}
	}
}

// toolParts yields the index of each tool part of parts (a message's) and
// the step it belongs to.
func toolParts(parts []UIPart) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		step := -1
		for i := range parts {
			switch p := &parts[i]; {
			case p.Type == PartStepStart:
				step++
			case p.IsTool():
				if !yield(i, max(step, 0)) {
					return
				}
			}
		}
	}
}

// settleApproval resolves the part at index i by r.
func (t *turn) settleApproval(ctx context.Context, i int, r ApprovalResponse, step int, msgs []ModelMessage) {
	part := &t.msg.Parts[i]
	name := part.ToolPartName()
	cs := callState{
		call: ToolCall{ToolCallID: part.ToolCallID, ToolName: name, Input: orEmpty(part.Input), Dynamic: part.Type == PartDynamicTool},
		part: i,
	}
	approval := *part.Approval
	approval.Approved, approval.Reason = &r.Approved, r.Reason
	if r.Approved {
		t.decide(ctx, &cs, true, step, msgs, t.namesOfTools())
		switch {
		case cs.approval != nil && !sameJSON(cs.effective, r.Input):
			r.Reason = inputChangedReason
		case cs.approval != nil:
			cs.approval, cs.decision, cs.run = nil, DecisionAllow, true
			if !bytes.Equal(cs.effective, cs.call.Input) {
				cs.decision = DecisionRewrite
			}
		case cs.pending:
			cs.pending = false
			cs.policyError(fmt.Errorf("tool %q became a client tool while it waited for approval", name))
		}
		if cs.approval == nil {
			if cs.run {
				t.runTool(ctx, &cs, step, msgs)
			}
			t.settle(ctx, &cs, &StepResult{StepNumber: step}, msgs)
			part.Approval = &approval
			return
		}
		// The input changed: refused as a denial that says why.
		t.records = t.records[:cs.record]
		approval.Approved = new(bool)
		approval.Reason = r.Reason
	}
	text := deniedText(r.Reason)
	part.State, part.Approval, part.Output, part.ErrorText = ToolStateOutputDenied, &approval, nil, ""
	t.records = append(t.records, ToolCallRecord{ToolCallID: part.ToolCallID, ToolName: name, Input: cs.call.Input, StepNumber: step, Decision: DecisionDenied})
	t.emit(Event{Type: EventToolOutputDenied, ToolCallID: part.ToolCallID})
	rc := &ToolCallResultContext{
		Identity:   t.identity(),
		Type:       "tool-call",
		ToolCallID: part.ToolCallID,
		ToolName:   name,
		Input:      cs.call.Input,
		Dynamic:    cs.call.Dynamic,
		StepNumber: step,
		Messages:   msgs,
		Decision:   DecisionDenied,
		Error:      text,
	}
	if j, ok := t.toolIndex[name]; ok {
		rc.Tool = t.tools[j].ToolInfo
	}
	t.callAfterToolCall(ctx, rc)
}

// namesOfTools lists every tool of the turn.
func (t *turn) namesOfTools() []string {
	names := make([]string, len(t.tools))
	for i := range t.tools {
		names[i] = t.tools[i].Name
	}
	return names
}

func orEmpty(in json.RawMessage) json.RawMessage {
	if len(in) == 0 {
		return emptyObject
	}
	return in
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b json.RawMessage) bool {
	x, errX := canonicalJSON(a)
	y, errY := canonicalJSON(b)
	return errX == nil && errY == nil && bytes.Equal(x, y)
}

// canonicalJSON re-encodes v with object keys sorted and numbers as
// written.
func canonicalJSON(v json.RawMessage) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return json.Marshal(x)
}

// mergeApproval adds d's reasons to acc (nil at first), so hooks composed
// together ask one approval for every reason.
func mergeApproval(acc, d *ToolCallDecision) *ToolCallDecision {
	if acc == nil {
		return &ToolCallDecision{Action: ActionApproval, Approvals: slices.Clone(d.Approvals)}
	}
	acc.Approvals = append(acc.Approvals, d.Approvals...)
	return acc
}
