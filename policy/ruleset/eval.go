package ruleset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
	"github.com/turngate/turngate/policy/state"
)

// MaxEvalInputBytes bounds a dry-run input document.
const MaxEvalInputBytes = 8 << 20

// EvalResult is the outcome of one dry-run hook evaluation.
type EvalResult struct {
	Hook     string `json:"hook"`
	Revision string `json:"revision"`
	// Outcome is one of the policy.Outcome constants.
	Outcome string `json:"outcome"`
	// Result is the overrides (beforeTurn, beforeStep) or the decision
	// (beforeToolCall, toolResult); absent when nothing changes.
	Result     any      `json:"result,omitempty"`
	RulesFired []string `json:"rulesFired"`
	// RulesFiredAt says where each of RulesFired is defined, file:line
	// (policy.Record.RulesFiredAt).
	RulesFiredAt []string          `json:"rulesFiredAt,omitempty"`
	SetBy        map[string]string `json:"setBy,omitempty"`
	// Conflicts lists the fields rules set to different values.
	Conflicts []policy.Conflict `json:"conflicts,omitempty"`
	// Shadow is the shadow rules' would-be outcome beside the enforced one
	// (Result); absent when the hook has no shadow rules.
	Shadow *policy.Shadow `json:"shadow,omitempty"`
	Error  string         `json:"error,omitempty"`
	// Prints is what Rego print() calls wrote.
	Prints []string `json:"prints,omitempty"`
	// Input is the input the rules saw, as a decision record carries it:
	// the Rego input document (beforeToolCall, toolResult), or the CEL
	// variables {turn, step, principal, now} (beforeTurn, beforeStep).
	Input json.RawMessage `json:"input,omitempty"`
	// NotFired, set by Explain, lists the rules that did not fire and why.
	NotFired []policy.NotFired `json:"notFired,omitempty"`
}

// Explain sets res.NotFired to the rules of r that did not fire on the
// input res evaluated (res.Input, as Eval returned it): the CEL rules whose
// when did not hold, with its value, and the Rego decision rule
// definitions whose body failed, with the first expression that failed.
// It is a separate evaluation (traced, for Rego) under ctx and the rules'
// deadlines; every hook with rules is explained.
func (r *Revision) Explain(ctx context.Context, res *EvalResult) {
	if len(res.Input) == 0 {
		return
	}
	switch res.Hook {
	case policy.HookBeforeTurn, policy.HookBeforeStep:
		in, err := celrules.DecodeInput(res.Input)
		if err != nil {
			return
		}
		if res.Hook == policy.HookBeforeTurn {
			res.NotFired = r.cel.WhyNotTurn(ctx, in.TurnContext(), in.Clock())
		} else {
			res.NotFired = r.cel.WhyNotStep(ctx, in.StepContext(), in.Clock())
		}
	case policy.HookBeforePersist, policy.HookOnChatError:
		in, err := celrules.DecodeInput(res.Input)
		switch {
		case err != nil:
		case res.Hook == policy.HookBeforePersist && in.Message != nil:
			res.NotFired = r.cel.WhyNotPersist(ctx, in.Identity(), in.Message, in.Clock())
		case res.Hook == policy.HookOnChatError && in.Error != nil:
			res.NotFired = r.cel.WhyNotChatError(ctx, in.ChatErrorContext(), in.Clock())
		}
	case policy.HookBeforeToolCall:
		if tc, err := opa.DecodeToolCallInput(res.Input); err == nil {
			res.NotFired = r.rego.WhyNotToolCall(ctx, tc)
		}
	case policy.HookToolResult:
		if rc, err := opa.DecodeToolResultInput(res.Input); err == nil {
			res.NotFired = r.rego.WhyNotToolResult(ctx, rc)
		}
	}
}

// Eval dry-runs one hook ("beforeTurn", "beforeStep", "beforeToolCall" or
// "toolResult") on r with input, a JSON or YAML document, one of:
//
//   - a document Eval printed (an EvalResult) or a decision record of the
//     audit log: its hook and input are evaluated again, its other members
//     ignored; hook may be "" and must otherwise be the document's;
//   - for beforeToolCall and toolResult, the hook's engine context
//     (engine.ToolCallContext, engine.ToolCallResultContext) by its JSON
//     field names;
//   - for beforeTurn and beforeStep, either the hook's engine context
//     (engine.TurnContext, engine.PrepareStepContext) or the input of a CEL
//     test case ({turn, step, principal, now}, see celrules.Input), told
//     apart by its top-level keys.
//
// Unknown fields are errors. Eval evaluates exactly as a turn would,
// failing closed; an evaluation error is reported in the result, and only
// a bad hook name or input is returned as an error.
func (r *Revision) Eval(ctx context.Context, hook string, input []byte) (*EvalResult, error) {
	if err := checkInputSize(input); err != nil {
		return nil, err
	}
	doc, err := evaluatedDocument(input)
	if err != nil {
		return nil, err
	}
	if doc != nil {
		if hook != "" && hook != doc.Hook {
			return nil, fmt.Errorf("the input is a %s evaluation, not %s", doc.Hook, hook)
		}
		return r.EvalRecorded(ctx, doc.Hook, doc.Input)
	}
	switch hook {
	case policy.HookBeforeTurn, policy.HookBeforeStep:
		in, err := celInput(hook, input)
		if err != nil {
			return nil, err
		}
		return r.evalCEL(ctx, hook, in), nil
	case policy.HookBeforePersist, policy.HookOnChatError:
		in, err := celrules.DecodeInput(input)
		if err != nil {
			return nil, err
		}
		return r.evalIdentified(ctx, hook, in)
	case policy.HookBeforeToolCall:
		var tc engine.ToolCallContext
		if err := DecodeInput(input, &tc); err != nil {
			return nil, err
		}
		return r.evalHook(func(h *hooks) { _, _ = h.BeforeToolCall(ctx, &tc) }), nil
	case policy.HookToolResult:
		var rc engine.ToolCallResultContext
		if err := DecodeInput(input, &rc); err != nil {
			return nil, err
		}
		return r.evalHook(func(h *hooks) { _, _ = h.ToolResult(ctx, &rc) }), nil
	case "":
		return nil, errors.New("no hook named, and the input is not an evaluated document (with hook and input members)")
	}
	return nil, unknownHook(hook)
}

// EvalRecorded evaluates hook on r with input as a decision record carries
// it (policy.Record.Input, EvalResult.Input): the Rego input document for
// beforeToolCall and toolResult, the CEL variables {turn, step, principal,
// now} for beforeTurn and beforeStep. It is how recorded decisions are
// replayed against another rule set; errors are as for Eval.
func (r *Revision) EvalRecorded(ctx context.Context, hook string, input json.RawMessage) (*EvalResult, error) {
	switch hook {
	case policy.HookBeforeTurn, policy.HookBeforeStep:
		in, err := celrules.DecodeInput(input)
		if err != nil {
			return nil, err
		}
		recorded := in.TurnContext().State
		if hook == policy.HookBeforeStep {
			recorded = in.StepContext().State
		}
		if err := r.checkRecordedState(hook, recorded); err != nil {
			return nil, err
		}
		return r.evalCEL(ctx, hook, in), nil
	case policy.HookBeforePersist, policy.HookOnChatError:
		in, err := celrules.DecodeInput(input)
		if err != nil {
			return nil, err
		}
		return r.evalIdentified(ctx, hook, in)
	case policy.HookBeforeToolCall:
		tc, err := opa.DecodeToolCallInput(input)
		if err != nil {
			return nil, err
		}
		if err := r.checkRecordedState(hook, tc.State); err != nil {
			return nil, err
		}
		return r.evalHook(func(h *hooks) { _, _ = h.BeforeToolCall(ctx, tc) }), nil
	case policy.HookToolResult:
		rc, err := opa.DecodeToolResultInput(input)
		if err != nil {
			return nil, err
		}
		if err := r.checkRecordedState(hook, rc.State); err != nil {
			return nil, err
		}
		return r.evalHook(func(h *hooks) { _, _ = h.ToolResult(ctx, rc) }), nil
	}
	return nil, unknownHook(hook)
}

// UnrecordedStateError is EvalRecorded's refusal of a recorded input that
// lacks a declared state the revision's rules read: the value it had when
// the decision was made is unknown, and a guess would make the replay
// say what the candidate would have decided on made-up data.
type UnrecordedStateError struct {
	Hook string
	// Names are the states read but not recorded, sorted.
	Names []string
}

func (e *UnrecordedStateError) Error() string {
	return fmt.Sprintf("not replayable: the rules read state the %s record does not hold: %s", e.Hook, strings.Join(e.Names, ", "))
}

// checkRecordedState returns an UnrecordedStateError when the rules of
// hook read a state recorded lacks. A timeSinceLast state is absent from
// a record when nothing had happened; so it counts as recorded when the
// record holds state at all.
//
// A recorded value of another shape than the candidate's declaration
// gives (a number where it declares happenedBefore, or the reverse) was
// read under another declaration of that name: it is not recorded either.
func (r *Revision) checkRecordedState(hook string, recorded map[string]any) error {
	var missing []string
	for _, d := range r.StateReads(hook) {
		v, ok := recorded[d.Name]
		if ok && !sameShape(d, v) {
			missing = append(missing, d.Name+" (recorded as another kind)")
			continue
		}
		if ok || (d.Kind == state.TimeSinceLast && recorded != nil) {
			continue
		}
		missing = append(missing, d.Name)
	}
	if missing == nil {
		return nil
	}
	return &UnrecordedStateError{Hook: hook, Names: missing}
}

// sameShape reports whether v, a recorded value, is what d reads: an
// object with happened for happenedBefore, a number for the others.
func sameShape(d *state.Decl, v any) bool {
	if d.Kind == state.HappenedBefore {
		m, ok := v.(map[string]any)
		_, happened := m["happened"]
		return ok && happened
	}
	switch v.(type) {
	case json.Number, float64, int, int64:
		return true
	}
	return false
}

func unknownHook(hook string) error {
	return fmt.Errorf("unknown hook %q (want %s, %s, %s, %s, %s or %s)", hook,
		policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforeToolCall, policy.HookToolResult,
		policy.HookBeforePersist, policy.HookOnChatError)
}

// evalIdentified runs the beforePersist rules ({message, principal, agent,
// sessionId, requestId, now}) or the onChatError rules ({error, principal,
// agent, sessionId, requestId, now}) on a dry-run input at its clock. A
// revision without onChatError rules still answers, not_evaluated.
func (r *Revision) evalIdentified(ctx context.Context, hook string, in *celrules.Input) (*EvalResult, error) {
	rc := r.withClock(in.Clock())
	if hook == policy.HookOnChatError {
		if in.Error == nil {
			return nil, errors.New("decoding input: an onChatError input needs error")
		}
		return rc.evalHook(func(h *hooks) { _ = h.OnChatError(ctx, in.ChatErrorContext()) }), nil
	}
	if in.Message == nil {
		return nil, errors.New("decoding input: a beforePersist input needs message")
	}
	return rc.evalHook(func(h *hooks) { _, _ = h.BeforePersist(ctx, in.Identity(), in.Message) }), nil
}

// evalCEL runs a CEL hook on a dry-run input at the input's clock (the
// Unix epoch when it has none, as in CEL test cases).
func (r *Revision) evalCEL(ctx context.Context, hook string, in *celrules.Input) *EvalResult {
	return r.withClock(in.Clock()).evalHook(func(h *hooks) {
		if hook == policy.HookBeforeTurn {
			_, _ = h.BeforeTurn(ctx, in.TurnContext())
		} else {
			_, _ = h.BeforeStep(ctx, in.StepContext())
		}
	})
}

// evalHook runs one hook evaluation with hooks that capture its record and
// print() output, failing closed, and returns them as an EvalResult.
func (r *Revision) evalHook(run func(h *hooks)) *EvalResult {
	var (
		rec    *policy.Record
		prints []string
	)
	h := r.hooks(policy.RecorderFunc(func(x *policy.Record) { rec = x }), FailClosed)
	h.prints = &prints
	h.dryRun = true
	run(h)
	res := &EvalResult{
		Hook:         rec.Hook,
		Revision:     rec.Revision,
		Outcome:      rec.Outcome,
		Result:       rec.Decision,
		RulesFired:   rec.RulesFired,
		RulesFiredAt: rec.RulesFiredAt,
		SetBy:        rec.SetBy,
		Conflicts:    rec.Conflicts,
		Shadow:       rec.Shadow,
		Error:        rec.Error,
		Prints:       prints,
		Input:        rec.Input,
	}
	if res.RulesFired == nil {
		res.RulesFired = []string{}
	}
	return res
}

// evaluatedDoc is the part of an evaluated document (an EvalResult or a
// decision record) that Eval evaluates again.
type evaluatedDoc struct {
	Hook  string          `json:"hook"`
	Input json.RawMessage `json:"input"`
}

// evaluatedMembers are the top-level members an evaluated document may
// have: those of EvalResult and of policy.Record.
var evaluatedMembers = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range []reflect.Type{reflect.TypeFor[EvalResult](), reflect.TypeFor[policy.Record]()} {
		for f := range t.Fields() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				m[name] = true
			}
		}
	}
	return m
}()

// auditDecisionKind is the "kind" of the audit log's decision lines.
const auditDecisionKind = "decision"

// evaluatedDocument returns input's hook and input when it is an evaluated
// document: an object with "hook" and "input" members, all of its members
// known, or a line of the audit log. It returns nil for any other input.
//
// An audit line is told by its "kind" member. A decision line is evaluated
// whatever else the log put beside the record (its hash chain's seq and
// prevHash, and whatever a later version adds): the gateway wrote those,
// not the user. A line of another kind (a turn record, a chain-start, …)
// carries no hook input, and saying so beats decoding it as a hook's
// context and failing on its first member.
func evaluatedDocument(input []byte) (*evaluatedDoc, error) {
	js, err := toJSON(input)
	if err != nil {
		return nil, nil // the hook's decoder reports it
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(js, &top) != nil {
		return nil, nil
	}
	audit := top["kind"] != nil
	if audit {
		var kind string
		if err := json.Unmarshal(top["kind"], &kind); err != nil {
			return nil, fmt.Errorf("decoding input: kind: %w", err)
		}
		switch {
		case kind != auditDecisionKind:
			return nil, fmt.Errorf("decoding input: an audit %q record holds no hook input: give a %q record of the audit log, a document eval printed or a hook's context", kind, auditDecisionKind)
		case top["hook"] == nil:
			return nil, errors.New(`decoding input: the audit decision record has no "hook"`)
		case top["input"] == nil || string(top["input"]) == "null":
			return nil, errors.New("decoding input: the audit decision record carries no input to evaluate (it was recorded with audit.recordInput: false, or its input was redacted whole)")
		}
	}
	if top["hook"] == nil || top["input"] == nil {
		return nil, nil
	}
	for k := range top {
		if !audit && !evaluatedMembers[k] {
			return nil, fmt.Errorf("decoding input: an evaluated document (with hook and input) has no member %q", k)
		}
	}
	doc := &evaluatedDoc{Input: top["input"]}
	if err := json.Unmarshal(top["hook"], &doc.Hook); err != nil {
		return nil, fmt.Errorf("decoding input: hook: %w", err)
	}
	return doc, nil
}

// withClock returns a copy of r whose CEL "now" is t.
func (r *Revision) withClock(t time.Time) *Revision {
	c := *r
	c.opts.Now = func() time.Time { return t }
	return &c
}

// celInputKeys are the top-level keys of a CEL test-case input.
var celInputKeys = map[string]bool{"turn": true, "step": true, "principal": true, "now": true}

// celInput decodes a beforeTurn or beforeStep dry-run input: a CEL
// test-case input when every top-level key is one of celInputKeys, else
// the hook's engine context.
func celInput(hook string, input []byte) (*celrules.Input, error) {
	if err := checkInputSize(input); err != nil {
		return nil, err
	}
	var top map[string]any
	if err := yaml.Unmarshal(input, &top); err == nil {
		caseShape := true
		for k := range top {
			caseShape = caseShape && celInputKeys[k]
		}
		if caseShape {
			return celrules.DecodeInput(input)
		}
	}
	if hook == policy.HookBeforeTurn {
		var tc engine.TurnContext
		if err := DecodeInput(input, &tc); err != nil {
			return nil, err
		}
		return &celrules.Input{Turn: &tc}, nil
	}
	var sc engine.PrepareStepContext
	if err := DecodeInput(input, &sc); err != nil {
		return nil, err
	}
	return &celrules.Input{Step: &sc}, nil
}

// DecodeInput decodes a JSON or YAML document into v (a pointer to an
// engine context type) by v's JSON field names, rejecting unknown fields,
// trailing documents and inputs over MaxEvalInputBytes.
func DecodeInput(input []byte, v any) error {
	if err := checkInputSize(input); err != nil {
		return err
	}
	js, err := toJSON(input)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding input: %w", err)
	}
	if dec.More() {
		return errors.New("decoding input: more than one document")
	}
	return nil
}

// toJSON returns a JSON input as it is and a YAML one converted to JSON,
// so the engine types' JSON field names and types apply alike.
func toJSON(input []byte) ([]byte, error) {
	if trimmed := bytes.TrimSpace(input); len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return input, nil
	}
	var doc any
	dec := yaml.NewDecoder(bytes.NewReader(input))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("decoding input: empty document")
		}
		return nil, fmt.Errorf("decoding input: %w", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("decoding input: %w", err)
	}
	return js, nil
}

// checkInputSize refuses a dry-run input over MaxEvalInputBytes before any
// parser reads it.
func checkInputSize(input []byte) error {
	if len(input) > MaxEvalInputBytes {
		return fmt.Errorf("decoding input: %d bytes, over the %d byte limit", len(input), MaxEvalInputBytes)
	}
	return nil
}
