package ruleset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
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
	Result     any               `json:"result,omitempty"`
	RulesFired []string          `json:"rulesFired"`
	SetBy      map[string]string `json:"setBy,omitempty"`
	// Conflicts lists the fields rules set to different values.
	Conflicts []policy.Conflict `json:"conflicts,omitempty"`
	// Shadow is the shadow rules' would-be outcome beside the enforced one
	// (Result); absent when the hook has no shadow rules.
	Shadow *policy.Shadow `json:"shadow,omitempty"`
	Error  string         `json:"error,omitempty"`
	// Prints is what Rego print() calls wrote.
	Prints []string `json:"prints,omitempty"`
	// Input is the Rego input document the policy saw (beforeToolCall,
	// toolResult), for writing rules against it.
	Input map[string]any `json:"input,omitempty"`
}

// Eval dry-runs one hook ("beforeTurn", "beforeStep", "beforeToolCall" or
// "toolResult") on r with input, a JSON or YAML document. For
// beforeToolCall and toolResult it is the hook's engine context
// (engine.ToolCallContext, engine.ToolCallResultContext) by its JSON field
// names. For beforeTurn and beforeStep it is either the hook's engine
// context (engine.TurnContext, engine.PrepareStepContext) or the input of a
// CEL test case ({turn, step, principal, now}, see celrules.Input), told
// apart by its top-level keys. Unknown fields are errors.
//
// Eval evaluates exactly as a turn would, failing closed; an evaluation
// error is reported in the result, and only a bad hook name or input is
// returned as an error.
func (r *Revision) Eval(ctx context.Context, hook string, input []byte) (*EvalResult, error) {
	var (
		rec    *policy.Record
		prints []string
		regoIn map[string]any
	)
	capture := policy.RecorderFunc(func(x *policy.Record) { rec = x })
	hooksOn := func(r *Revision) *hooks {
		h := r.hooks(capture, FailClosed)
		h.prints = &prints
		return h
	}
	switch hook {
	case policy.HookBeforeTurn, policy.HookBeforeStep:
		in, err := celInput(hook, input)
		if err != nil {
			return nil, err
		}
		rr := r
		if in.Now != nil { // the input's clock is CEL's now
			rr = r.withClock(*in.Now)
		}
		h := hooksOn(rr)
		if hook == policy.HookBeforeTurn {
			_, _ = h.BeforeTurn(ctx, in.TurnContext())
		} else {
			_, _ = h.BeforeStep(ctx, in.StepContext())
		}
	case policy.HookBeforeToolCall:
		var tc engine.ToolCallContext
		if err := DecodeInput(input, &tc); err != nil {
			return nil, err
		}
		regoIn = opa.ToolCallInput(&tc)
		_, _ = hooksOn(r).BeforeToolCall(ctx, &tc)
	case policy.HookToolResult:
		var rc engine.ToolCallResultContext
		if err := DecodeInput(input, &rc); err != nil {
			return nil, err
		}
		regoIn = opa.ToolResultInput(&rc)
		_, _ = hooksOn(r).ToolResult(ctx, &rc)
	default:
		return nil, fmt.Errorf("unknown hook %q (want %s, %s, %s or %s)", hook,
			policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforeToolCall, policy.HookToolResult)
	}
	res := &EvalResult{
		Hook:       rec.Hook,
		Revision:   rec.Revision,
		Outcome:    rec.Outcome,
		Result:     rec.Decision,
		RulesFired: rec.RulesFired,
		SetBy:      rec.SetBy,
		Conflicts:  rec.Conflicts,
		Shadow:     rec.Shadow,
		Error:      rec.Error,
		Prints:     prints,
		Input:      regoIn,
	}
	if res.RulesFired == nil {
		res.RulesFired = []string{}
	}
	return res, nil
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
	js := input
	if trimmed := bytes.TrimSpace(input); len(trimmed) == 0 || (trimmed[0] != '{' && trimmed[0] != '[') {
		// Not JSON: YAML, converted to JSON so the engine types' JSON
		// field names and types apply alike.
		var doc any
		dec := yaml.NewDecoder(bytes.NewReader(input))
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("decoding input: empty document")
			}
			return fmt.Errorf("decoding input: %w", err)
		}
		var err error
		if js, err = json.Marshal(doc); err != nil {
			return fmt.Errorf("decoding input: %w", err)
		}
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

// checkInputSize refuses a dry-run input over MaxEvalInputBytes before any
// parser reads it.
func checkInputSize(input []byte) error {
	if len(input) > MaxEvalInputBytes {
		return fmt.Errorf("decoding input: %d bytes, over the %d byte limit", len(input), MaxEvalInputBytes)
	}
	return nil
}
