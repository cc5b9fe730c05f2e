package celrules

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// Trace says which rules fired and which rule set each field last.
type Trace struct {
	// RulesFired are the ids ("file.yaml#rule-name") of the rules whose
	// when held, in evaluation order.
	RulesFired []string
	// SetBy maps each field that was set to the id of the rule that set it
	// last (for stopWhen, the last rule that added a condition).
	SetBy map[string]string
}

// BeforeTurn evaluates the beforeTurn rules against a turn. It returns nil
// overrides when no rule fired. An evaluation error in any rule fails the
// whole hook (the caller fails closed); it is a *policy.Error naming the
// rule and field.
func (s *Set) BeforeTurn(ctx context.Context, tc *engine.TurnContext, now time.Time) (*engine.TurnConfig, Trace, error) {
	act := newActivation(tc, nil, &tc.Principal, now)
	var cfg engine.TurnConfig
	tr, err := s.eval(ctx, s.turnRules, s.turnLoops, act, func(f *fieldSpec, v any) { f.turn(&cfg, v) })
	if err != nil || tr.RulesFired == nil {
		return nil, tr, err
	}
	return &cfg, tr, nil
}

// BeforeStep evaluates the beforeStep rules before a model step. In these
// rules turn is the step's turn context (sc.Turn, or one built from the
// step when the engine gave none). It returns nil overrides when no rule
// fired; errors are as for BeforeTurn.
func (s *Set) BeforeStep(ctx context.Context, sc *engine.PrepareStepContext, now time.Time) (*engine.StepConfig, Trace, error) {
	turn := sc.Turn
	if turn == nil {
		turn = &engine.TurnContext{Identity: sc.Identity, System: sc.System, Messages: sc.Messages, Model: sc.Model}
	}
	act := newActivation(turn, sc, &sc.Principal, now)
	var cfg engine.StepConfig
	tr, err := s.eval(ctx, s.stepRules, s.stepLoops, act, func(f *fieldSpec, v any) { f.step(&cfg, v) })
	if err != nil || tr.RulesFired == nil {
		return nil, tr, err
	}
	return &cfg, tr, nil
}

// eval runs rules in order, applying each fired rule's fields.
func (s *Set) eval(ctx context.Context, rules []*rule, loops bool, act *activation, apply func(*fieldSpec, any)) (Trace, error) {
	var tr Trace
	if d, ok := ctx.Deadline(); loops && (!ok || time.Until(d) > s.opts.EvalTimeout) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.EvalTimeout)
		defer cancel()
	}
	for _, r := range rules {
		if r.when != nil {
			v, err := r.when.eval(ctx, act, r.id, "")
			if err != nil {
				return Trace{}, err
			}
			b, ok := v.(types.Bool)
			if !ok {
				return Trace{}, r.when.fail(r.id, "", policy.CodeEval, fmt.Sprintf("when must be bool but evaluated to %s", typeName(v)))
			}
			if !b {
				continue
			}
		}
		if tr.RulesFired == nil {
			tr.RulesFired = make([]string, 0, len(rules))
			tr.SetBy = make(map[string]string, 8)
		}
		tr.RulesFired = append(tr.RulesFired, r.id)
		for _, set := range r.sets {
			v, err := set.expr.eval(ctx, act, r.id, set.field.name)
			if err != nil {
				return Trace{}, err
			}
			d, err := set.field.decode(v)
			if err != nil {
				return Trace{}, set.expr.fail(r.id, set.field.name, policy.CodeEval,
					fmt.Sprintf("field %s: %v", set.field.name, err))
			}
			apply(set.field, d)
			tr.SetBy[set.field.name] = r.id
		}
	}
	return tr, nil
}

// eval evaluates one expression, classifying failures: a cost-limit trip is
// CodeCost, a cancelled or expired context CodeTimeout, anything else
// CodeEval.
func (e *expr) eval(ctx context.Context, act *activation, ruleID, field string) (ref.Val, error) {
	var (
		v   ref.Val
		err error
	)
	if e.loops {
		v, _, err = e.prg.ContextEval(ctx, act)
	} else {
		v, _, err = e.prg.Eval(act)
	}
	if err == nil {
		return v, nil
	}
	code := policy.CodeEval
	var cancelled interpreter.EvalCancelledError
	switch {
	case errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded:
		code = policy.CodeCost
	case errors.As(err, &cancelled) || ctx.Err() != nil:
		code = policy.CodeTimeout
	}
	return nil, e.fail(ruleID, field, code, err.Error())
}

// fail builds an evaluation error at the expression's position.
func (e *expr) fail(ruleID, field, code, msg string) *policy.Error {
	return &policy.Error{Code: code, Location: e.loc, Rule: ruleID, Field: field, Message: msg}
}

// activation binds the hook's variables in one allocation (cel-go's map
// activations cost several).
type activation struct {
	turn, step, principal object
	now                   types.Timestamp
}

func newActivation(tc *engine.TurnContext, sc *engine.PrepareStepContext, p *engine.Principal, now time.Time) *activation {
	a := &activation{
		turn:      object{turnType, tc},
		principal: object{principalType, p},
		now:       types.Timestamp{Time: now},
	}
	if sc != nil {
		a.step = object{stepType, sc}
	}
	return a
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "turn":
		return &a.turn, true
	case "step":
		return &a.step, a.step.ptr != nil
	case "principal":
		return &a.principal, true
	case "now":
		return a.now, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
