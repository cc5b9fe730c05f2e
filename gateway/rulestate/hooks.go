package rulestate

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
	"github.com/turngate/turngate/policy/state"
)

// Hooks returns inner with the revision's declared state read into the
// hook contexts and the turn's events recorded: a tool call is admitted
// (its rules' states read, the call counted as executed) before inner
// decides it, then settled to the decision's outcome, and to succeeded or
// failed after it ran when a declaration counts those; a turn is counted
// before beforeTurn, token usage after each step. A failed state read
// fails the call or the turn closed. A revision that declares no state
// gets inner itself.
func (t *Tracker) Hooks(rev *ruleset.Revision, inner engine.Hooks) engine.Hooks {
	if t == nil || rev.State().Len() == 0 {
		return inner
	}
	return &hooks{Hooks: inner, t: t, rev: rev, set: rev.State(), settleResults: countsResults(rev.State())}
}

// countsResults reports whether some declaration tells succeeded or
// failed calls from executed ones, which costs a settlement per call.
func countsResults(s *state.Set) bool {
	for _, d := range s.Decls() {
		if slices.Contains(d.Outcomes, state.OutcomeSucceeded) || slices.Contains(d.Outcomes, state.OutcomeFailed) {
			return true
		}
	}
	return false
}

type hooks struct {
	engine.Hooks
	t             *Tracker
	rev           *ruleset.Revision
	set           *state.Set
	settleResults bool

	mu      sync.Mutex
	pending map[string]*Pending // executed and held calls by tool call id, settled once they ran
}

// BeforeTurn reads the states the beforeTurn rules read and counts the
// turn, as one step, then runs inner.
func (h *hooks) BeforeTurn(ctx context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	vals, _, err := h.t.Admit(ctx, &Event{Kind: state.EventTurn, Identity: tc.Identity}, h.rev.StateReads(policy.HookBeforeTurn), h.set)
	if err != nil {
		return nil, fmt.Errorf("recording the turn in rule state: %w", err)
	}
	if vals != nil {
		tc.State = vals
	}
	return h.Hooks.BeforeTurn(ctx, tc)
}

// BeforeStep reads the states the beforeStep rules read, then runs inner.
func (h *hooks) BeforeStep(ctx context.Context, sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
	if reads := h.rev.StateReads(policy.HookBeforeStep); len(reads) > 0 {
		vals, err := h.t.Read(ctx, &Event{Kind: state.EventTurn, Identity: sc.Identity}, reads)
		if err != nil {
			return nil, fmt.Errorf("reading rule state: %w", err)
		}
		sc.State = vals
	}
	return h.Hooks.BeforeStep(ctx, sc)
}

// BeforeToolCall admits the call, runs inner with the state read, and
// settles the call to inner's decision.
func (h *hooks) BeforeToolCall(ctx context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	ev := &Event{Kind: state.EventToolCall, Identity: tc.Identity, Tool: tc.ToolName, Input: tc.Input}
	vals, p, err := h.t.Admit(ctx, ev, h.rev.StateReads(policy.HookBeforeToolCall), h.set)
	if err != nil {
		return nil, fmt.Errorf("reading rule state: %w", err)
	}
	if vals != nil {
		tc.State = vals
	}
	d, err := h.Hooks.BeforeToolCall(ctx, tc)
	outcome := callOutcome(d, err)
	if serr := p.Settle(context.WithoutCancel(ctx), outcome); serr != nil {
		h.t.opts.Logger.Warn("settling a tool call in rule state", "toolCallId", tc.ToolCallID, "outcome", outcome, "err", serr)
	}
	// An executed call is settled again once it ran when a declaration
	// tells succeeded from failed; a held one when a person's approval
	// lets it run (the engine decides it again then, and runs it).
	if p != nil && ((outcome == state.OutcomeExecuted && h.settleResults) || outcome == state.OutcomeApproval) {
		h.mu.Lock()
		if h.pending == nil {
			h.pending = map[string]*Pending{}
		}
		h.pending[tc.ToolCallID] = p
		h.mu.Unlock()
	}
	return d, err
}

// callOutcome is the outcome a decision records.
func callOutcome(d *engine.ToolCallDecision, err error) string {
	switch {
	case err != nil:
		return state.OutcomeError
	case d == nil:
		return state.OutcomeExecuted
	}
	switch d.Action {
	case engine.ActionBlock:
		return state.OutcomeBlocked
	case engine.ActionSubstitute:
		return state.OutcomeSubstituted
	case engine.ActionApproval:
		return state.OutcomeApproval
	}
	return state.OutcomeExecuted
}

// ToolResult reads the states the toolResult rules read, then runs inner.
func (h *hooks) ToolResult(ctx context.Context, rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
	if reads := h.rev.StateReads(policy.HookToolResult); len(reads) > 0 {
		vals, err := h.t.Read(ctx, &Event{Kind: state.EventToolCall, Identity: rc.Identity, Tool: rc.ToolName, Input: rc.Input}, reads)
		if err != nil {
			return nil, fmt.Errorf("reading rule state: %w", err)
		}
		rc.State = vals
	}
	return h.Hooks.ToolResult(ctx, rc)
}

// AfterToolCall settles a call that ran: a held call approved and run
// becomes executed, and either becomes succeeded or failed when a
// declaration counts those.
func (h *hooks) AfterToolCall(ctx context.Context, rc *engine.ToolCallResultContext) {
	h.Hooks.AfterToolCall(ctx, rc)
	h.mu.Lock()
	p := h.pending[rc.ToolCallID]
	delete(h.pending, rc.ToolCallID)
	h.mu.Unlock()
	if p == nil || !rc.Executed {
		return
	}
	outcome := state.OutcomeExecuted
	switch {
	case !h.settleResults:
	case rc.Success:
		outcome = state.OutcomeSucceeded
	default:
		outcome = state.OutcomeFailed
	}
	if err := p.Settle(context.WithoutCancel(ctx), outcome); err != nil {
		h.t.opts.Logger.Warn("settling a tool call in rule state", "toolCallId", rc.ToolCallID, "outcome", outcome, "err", err)
	}
}

// OnStepFinish records the step's token usage.
func (h *hooks) OnStepFinish(ctx context.Context, s *engine.StepResult) {
	h.Hooks.OnStepFinish(ctx, s)
	ev := &Event{Kind: state.EventTokens, Identity: s.Identity, InputTokens: s.Usage.InputTokens, OutputTokens: s.Usage.OutputTokens}
	if err := h.t.Record(context.WithoutCancel(ctx), ev, h.set); err != nil {
		h.t.opts.Logger.Warn("recording token usage in rule state", "err", err)
	}
}
