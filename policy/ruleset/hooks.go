package ruleset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/tracing"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
)

// FailurePolicy says what a rule evaluation error does to the turn.
type FailurePolicy int

const (
	// FailClosed, the default, returns the error to the engine: a
	// beforeToolCall or toolResult error becomes a tool error the model
	// sees, a beforeTurn or beforeStep error fails the turn.
	FailClosed FailurePolicy = iota
	// FailOpen logs and records the error, then allows the tool call or
	// applies no overrides. It is an explicit per-gateway setting.
	FailOpen
)

// String returns "fail-closed" or "fail-open".
func (fp FailurePolicy) String() string {
	if fp == FailOpen {
		return "fail-open"
	}
	return "fail-closed"
}

// Hooks returns the engine.Hooks of one turn evaluated on r: beforeTurn and
// beforeStep run the CEL rules, beforeToolCall and toolResult the Rego
// policy. Every evaluation sends a policy.Record to rec (nil discards them).
// The observation hooks do nothing; the gateway adds its own observers.
func (r *Revision) Hooks(rec policy.Recorder, fp FailurePolicy) engine.Hooks {
	return r.hooks(rec, fp)
}

func (r *Revision) hooks(rec policy.Recorder, fp FailurePolicy) *hooks {
	if rec == nil {
		return &hooks{rev: r, rec: policy.RecorderFunc(func(*policy.Record) {}), fp: fp}
	}
	ir, ok := rec.(policy.InputRecorder)
	return &hooks{rev: r, rec: rec, fp: fp, recordInput: !ok || ir.RecordsInput()}
}

// hooks is the engine.Hooks adapter of one turn.
type hooks struct {
	engine.NopHooks
	rev *Revision
	rec policy.Recorder
	fp  FailurePolicy
	// recordInput says whether records carry the evaluated input.
	recordInput bool
	// dryRun is set by Eval: its record goes to the caller, not to the
	// audit log.
	dryRun bool
	// prints, when set (by Eval), receives what Rego print() wrote.
	prints *[]string
	// files holds the stand-ins of the turn's inline files, hashed once
	// for all its records.
	files standIns
}

// trace is what one evaluation reports besides its result.
type trace struct {
	fired     []string
	firedAt   []string
	setBy     map[string]string
	conflicts []policy.Conflict
	shadow    *policy.Shadow
	prints    []string
	// input renders the evaluated input for the record; nil when the
	// evaluation built none.
	input func() json.RawMessage
}

// evaluate runs one hook evaluation, fills in and sends its record, and
// applies the failure policy. has says whether the revision has rules for
// the hook at all; without them nothing runs and the record says
// not_evaluated. input renders the hook's input for the record when the
// evaluation did not (a candidate rule set may have rules for the hook).
func evaluate[T any](ctx context.Context, h *hooks, r *policy.Record, has bool,
	eval func(ctx context.Context, now time.Time) (*T, trace, error), input func(now time.Time) json.RawMessage) (*T, error) {
	defer tracing.Decision(ctx, r) // on the hook's span, when traced
	r.Revision = h.rev.id
	start := time.Now()
	r.Time = start
	if h.rev.opts.Now != nil {
		r.Time = h.rev.opts.Now()
	}
	if !has {
		r.Outcome = policy.OutcomeNotEvaluated
		h.fillInput(r, nil, input)
		h.rec.Record(r)
		return nil, nil
	}
	out, tr, err := eval(ctx, r.Time)
	r.DurationMicros = time.Since(start).Microseconds()
	r.RulesFired, r.RulesFiredAt, r.SetBy, r.Conflicts, r.Shadow = tr.fired, tr.firedAt, tr.setBy, tr.conflicts, tr.shadow
	if h.prints != nil {
		*h.prints = tr.prints
	}
	if err != nil {
		r.Outcome = policy.OutcomeError
		r.Error = err.Error()
		h.fillInput(r, tr.input, input)
		h.rec.Record(r)
		if h.fp == FailOpen {
			h.rev.opts.Logger.Warn("rule evaluation failed; failing open",
				"hook", r.Hook, "revision", r.Revision, "requestId", r.RequestID, "error", err)
			return nil, nil
		}
		return nil, fmt.Errorf("evaluating %s rules: %w", r.Hook, err)
	}
	r.Outcome = policy.OutcomeNoMatch
	if len(tr.fired) > 0 {
		r.Outcome = policy.OutcomeMatched
	}
	if out != nil {
		r.Decision = out
	}
	h.fillInput(r, tr.input, input)
	h.rec.Record(r)
	return out, nil
}

// fillInput sets the record's input when the hooks record inputs: the one
// the evaluation rendered (rendered), else one rendered from the hook's
// context (input). A toolResult record whose rules changed the output or
// failed gets none outside a dry run: its input holds the output the model
// never saw, secrets the rules redacted included, and the audit log keeps
// only what the model saw. File parts' data: URLs are replaced by their
// stand-ins (compactInput before a CEL input is rendered, compactFiles on
// every rendered input).
func (h *hooks) fillInput(r *policy.Record, rendered func() json.RawMessage, input func(now time.Time) json.RawMessage) {
	if !h.recordInput || (!h.dryRun && r.Hook == policy.HookToolResult &&
		(r.Outcome == policy.OutcomeMatched || r.Outcome == policy.OutcomeError)) {
		return
	}
	if rendered != nil {
		r.Input = h.files.compactFiles(rendered())
	} else {
		r.Input = h.files.compactFiles(input(r.Time))
	}
}

// newRecord starts the record of one evaluation of hook for the turn id.
func newRecord(hook string, id *engine.Identity) *policy.Record {
	return &policy.Record{
		Hook:      hook,
		RequestID: id.RequestID,
		SessionID: id.SessionID,
		Agent:     id.Agent,
		Tenant:    id.Principal.Tenant,
	}
}

// stepRecord is a record and the step number it points at, allocated
// together.
type stepRecord struct {
	policy.Record
	step int
}

// newStepRecord starts the record of one evaluation of hook at a step.
func newStepRecord(hook string, id *engine.Identity, step int) *policy.Record {
	sr := &stepRecord{Record: policy.Record{
		Hook:      hook,
		RequestID: id.RequestID,
		SessionID: id.SessionID,
		Agent:     id.Agent,
		Tenant:    id.Principal.Tenant,
	}, step: step}
	sr.StepNumber = &sr.step
	return &sr.Record
}

// BeforeTurn runs the revision's CEL beforeTurn rules.
func (h *hooks) BeforeTurn(ctx context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	r := newRecord(policy.HookBeforeTurn, &tc.Identity)
	return evaluate(ctx, h, r, h.rev.cel.HasBeforeTurn(),
		func(ctx context.Context, now time.Time) (*engine.TurnConfig, trace, error) {
			cfg, tr, err := h.rev.cel.BeforeTurn(ctx, tc, now)
			return cfg, celTrace(tr), err
		}, func(now time.Time) json.RawMessage { return h.marshalInput(celrules.TurnInput(tc, now)) })
}

// BeforeStep runs the revision's CEL beforeStep rules.
func (h *hooks) BeforeStep(ctx context.Context, sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
	r := newStepRecord(policy.HookBeforeStep, &sc.Identity, sc.StepNumber)
	return evaluate(ctx, h, r, h.rev.cel.HasBeforeStep(),
		func(ctx context.Context, now time.Time) (*engine.StepConfig, trace, error) {
			cfg, tr, err := h.rev.cel.BeforeStep(ctx, sc, now)
			return cfg, celTrace(tr), err
		}, func(now time.Time) json.RawMessage { return h.marshalInput(celrules.StepInput(sc, now)) })
}

// BeforeToolCall evaluates the revision's data.turngate.tool_call.
func (h *hooks) BeforeToolCall(ctx context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	r := newStepRecord(policy.HookBeforeToolCall, &tc.Identity, tc.StepNumber)
	r.ToolCallID, r.ToolName, r.ToolKind, r.ToolServer = tc.ToolCallID, tc.ToolName, tc.Tool.Kind, tc.Tool.Server
	return evaluate(ctx, h, r, h.rev.rego.HasToolCall(),
		func(ctx context.Context, _ time.Time) (*engine.ToolCallDecision, trace, error) {
			d, tr, err := h.rev.rego.ToolCall(ctx, tc)
			return d, regoTrace(tr), err
		}, func(time.Time) json.RawMessage { return orNil(opa.ToolCallInputJSON(tc)) })
}

// ToolResult evaluates the revision's data.turngate.tool_result.
func (h *hooks) ToolResult(ctx context.Context, rc *engine.ToolCallResultContext) (*engine.ToolResultDecision, error) {
	r := newStepRecord(policy.HookToolResult, &rc.Identity, rc.StepNumber)
	r.ToolCallID, r.ToolName, r.ToolKind, r.ToolServer = rc.ToolCallID, rc.ToolName, rc.Tool.Kind, rc.Tool.Server
	return evaluate(ctx, h, r, h.rev.rego.HasToolResult(),
		func(ctx context.Context, _ time.Time) (*engine.ToolResultDecision, trace, error) {
			d, tr, err := h.rev.rego.ToolResult(ctx, rc)
			return d, regoTrace(tr), err
		}, func(time.Time) json.RawMessage { return orNil(opa.ToolResultInputJSON(rc)) })
}

// HasBeforePersist reports whether the revision has beforePersist rules.
func (r *Revision) HasBeforePersist() bool { return r.cel.HasBeforePersist() }

// BeforePersist runs the revision's CEL beforePersist rules on m, a
// message the store is about to write for the turn id, and returns the
// message to store: m itself when no rule fired. An error means m must not
// be stored, whatever the gateway's failure policy: a message the rules
// failed to mask, stored as it is, would be the silent leak the rules exist
// to prevent (the record says so).
//
// The record's input is the message as stored when a rule masked it: the
// audit log is one more store, and an unmasked copy there would undo the
// rule. Such a record replays on the masked message; a record of a message
// no rule changed replays exactly.
func (r *Revision) BeforePersist(ctx context.Context, rec policy.Recorder, id *engine.Identity, m engine.UIMessage) (engine.UIMessage, error) {
	if !r.cel.HasBeforePersist() {
		return m, nil // nothing to evaluate, nothing to record per message
	}
	h := r.hooks(rec, FailClosed)
	out, err := h.BeforePersist(ctx, id, &m)
	if err != nil {
		return engine.UIMessage{}, err
	}
	if out == nil {
		return m, nil
	}
	return out.Message, nil
}

// BeforePersist evaluates the beforePersist rules and records the
// evaluation (see Revision.BeforePersist for its input).
func (h *hooks) BeforePersist(ctx context.Context, id *engine.Identity, m *engine.UIMessage) (*celrules.Persisted, error) {
	r := newRecord(policy.HookBeforePersist, id)
	stored := m
	return evaluate(ctx, h, r, h.rev.cel.HasBeforePersist(),
		func(ctx context.Context, now time.Time) (*celrules.Persisted, trace, error) {
			p, tr, err := h.rev.cel.BeforePersist(ctx, id, m, now)
			if p != nil && p.Masked > 0 && !h.dryRun {
				stored = &p.Message
			}
			return p, celTrace(tr), err
		}, func(now time.Time) json.RawMessage {
			if r.Outcome == policy.OutcomeError && !h.dryRun {
				return nil // the message the rules failed on is not stored anywhere
			}
			return h.marshalInput(celrules.PersistInput(id, stored, now))
		})
}

// OnChatError runs the revision's CEL onChatError rules on a failure and
// returns the text they chose, nil when none fired. A revision without
// onChatError rules evaluates and records nothing outside a dry run.
// Whatever the failure
// policy, rules that fail to evaluate choose nothing: the failure keeps
// the masked default, which shows nothing of it (the record says why).
func (h *hooks) OnChatError(ctx context.Context, e *engine.ChatErrorContext) error {
	has := h.rev.cel.HasOnChatError()
	if !has && !h.dryRun {
		return nil
	}
	r := newRecord(policy.HookOnChatError, &e.Identity)
	r.ErrorClass = e.Class
	d, err := evaluate(ctx, h, r, has,
		func(ctx context.Context, now time.Time) (*celrules.ChatErrorDecision, trace, error) {
			d, tr, err := h.rev.cel.OnChatError(ctx, e, now)
			return d, celTrace(tr), err
		}, func(now time.Time) json.RawMessage { return h.marshalInput(celrules.ChatErrorInput(e, now)) })
	if err != nil && h.fp == FailClosed {
		h.rev.opts.Logger.Warn("onChatError rules failed; the error keeps its default text",
			"revision", r.Revision, "requestId", r.RequestID, "error", err)
	}
	if d == nil {
		return nil
	}
	return errors.New(d.Message)
}

// celTrace and regoTrace adapt the two evaluators' traces.
func celTrace(tr celrules.Trace) trace {
	return trace{fired: tr.RulesFired, firedAt: tr.RulesFiredAt, setBy: tr.SetBy, conflicts: tr.Conflicts, shadow: tr.Shadow}
}

func regoTrace(tr opa.Trace) trace {
	return trace{fired: tr.RulesFired, firedAt: tr.RulesFiredAt, prints: tr.Prints, shadow: tr.Shadow, input: tr.InputJSON}
}

// marshalInput renders a CEL hook's input for its record, its messages'
// inline files as stand-ins.
func (h *hooks) marshalInput(in *celrules.Input) json.RawMessage {
	return orNil(json.Marshal(h.files.compactInput(in)))
}

// orNil drops a recorded input that could not be rendered: the record
// then says the decision cannot be replayed, and the error is the
// evaluation's own (a field holding invalid JSON fails it).
func orNil(b []byte, err error) json.RawMessage {
	if err != nil {
		return nil
	}
	return b
}
