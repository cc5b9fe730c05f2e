package ruleset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
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
	Error      string            `json:"error,omitempty"`
}

// Eval dry-runs one hook ("beforeTurn", "beforeStep", "beforeToolCall" or
// "toolResult") on r with input, a JSON or YAML document of that hook's
// engine context (engine.TurnContext, engine.PrepareStepContext,
// engine.ToolCallContext or engine.ToolCallResultContext, by their JSON
// field names; unknown fields are errors). It evaluates exactly as a turn
// would, failing closed; an evaluation error is reported in the result, and
// only a bad hook name or input is returned as an error.
func (r *Revision) Eval(ctx context.Context, hook string, input []byte) (*EvalResult, error) {
	var rec *policy.Record
	h := r.Hooks(policy.RecorderFunc(func(x *policy.Record) { rec = x }), FailClosed)
	var err error
	switch hook {
	case policy.HookBeforeTurn:
		err = dryRun(ctx, input, h.BeforeTurn)
	case policy.HookBeforeStep:
		err = dryRun(ctx, input, h.BeforeStep)
	case policy.HookBeforeToolCall:
		err = dryRun(ctx, input, h.BeforeToolCall)
	case policy.HookToolResult:
		err = dryRun(ctx, input, h.ToolResult)
	default:
		return nil, fmt.Errorf("unknown hook %q (want %s, %s, %s or %s)", hook,
			policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforeToolCall, policy.HookToolResult)
	}
	if rec == nil { // the input did not decode
		return nil, err
	}
	res := &EvalResult{
		Hook:       rec.Hook,
		Revision:   rec.Revision,
		Outcome:    rec.Outcome,
		Result:     rec.Decision,
		RulesFired: rec.RulesFired,
		SetBy:      rec.SetBy,
		Error:      rec.Error,
	}
	if res.RulesFired == nil {
		res.RulesFired = []string{}
	}
	return res, nil
}

// dryRun decodes input as the context type C and calls hook with it; the
// hook's own error is already in its record.
func dryRun[C, R any](ctx context.Context, input []byte, hook func(context.Context, *C) (*R, error)) error {
	var c C
	if err := DecodeInput(input, &c); err != nil {
		return err
	}
	_, _ = hook(ctx, &c)
	return nil
}

// DecodeInput decodes a JSON or YAML document into v (a pointer to an
// engine context type) by v's JSON field names, rejecting unknown fields,
// trailing documents and inputs over MaxEvalInputBytes.
func DecodeInput(input []byte, v any) error {
	if len(input) > MaxEvalInputBytes {
		return fmt.Errorf("decoding input: %d bytes, over the %d byte limit", len(input), MaxEvalInputBytes)
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
