package celrules

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// Trace says which rules fired, which rule's value each field took, where
// rules disagreed, and what the shadow rules would have done.
type Trace struct {
	// RulesFired are the ids ("file.yaml#rule-name") of the enforced rules
	// whose when held, in evaluation order.
	RulesFired []string
	// RulesFiredAt says where each of RulesFired is defined, as
	// "file.yaml:line" (policy.Record.RulesFiredAt).
	RulesFiredAt []string
	// SetBy maps each field that was set to the id of the rule whose value
	// won (for stopWhen, the last rule that added a condition; see merge.go
	// for timeout).
	SetBy map[string]string
	// Conflicts lists the fields two fired rules set to different values.
	Conflicts []policy.Conflict
	// Shadow is what the hook's shadow rules would have done; nil when the
	// hook has none, or when the enforced rules failed.
	Shadow *policy.Shadow
}

// BeforeTurn evaluates the beforeTurn rules against a turn. It returns nil
// overrides when no rule fired. An evaluation error in any enforced rule
// fails the whole hook (the caller fails closed); it is a *policy.Error
// naming the rule and field. Shadow rules never change the overrides: their
// would-be effect, or their error, is in Trace.Shadow.
func (s *Set) BeforeTurn(ctx context.Context, tc *engine.TurnContext, now time.Time) (*engine.TurnConfig, Trace, error) {
	act := newActivation(tc, nil, &tc.Principal, now)
	return evalHook(ctx, s, s.turnRules, s.turnShadow, act,
		func(f *fieldSpec) func(*engine.TurnConfig, any) { return f.turn })
}

// BeforeStep evaluates the beforeStep rules before a model step. In these
// rules turn is the step's turn context (sc.Turn, or one built from the
// step when the engine gave none). It returns nil overrides when no rule
// fired; errors and shadow rules are as for BeforeTurn.
func (s *Set) BeforeStep(ctx context.Context, sc *engine.PrepareStepContext, now time.Time) (*engine.StepConfig, Trace, error) {
	return evalHook(ctx, s, s.stepRules, s.stepShadow, stepActivation(sc, now),
		func(f *fieldSpec) func(*engine.StepConfig, any) { return f.step })
}

// stepActivation is beforeStep's activation: turn is sc.Turn, or one
// built from the step when the engine gave none.
func stepActivation(sc *engine.PrepareStepContext, now time.Time) *activation {
	turn := sc.Turn
	if turn == nil {
		turn = &engine.TurnContext{Identity: sc.Identity, System: sc.System, Messages: sc.Messages, Model: sc.Model}
	}
	return newActivation(turn, sc, &sc.Principal, now)
}

// evalHook runs a hook's enforced rules, merges what they set into a
// config, then, when the hook has shadow rules, runs those apart (their own
// frame and deadline, so they cannot change the enforced outcome) and
// records the config they would have produced.
func evalHook[C any](ctx context.Context, s *Set, rules []*rule, hasShadow bool, act *activation,
	set func(*fieldSpec) func(*C, any)) (*C, Trace, error) {
	enforced, err := s.eval(ctx, rules, act, false)
	if err != nil {
		return nil, Trace{}, err
	}
	// Rules rarely set more than a few fields: the slots stay on the stack.
	var slots [8]slot
	m := merge(enforced.fired != nil, enforced.contribs, slots[:0])
	cfg := config(&m, set)
	tr := Trace{RulesFired: enforced.fired, RulesFiredAt: s.definedAt.At(enforced.fired), SetBy: m.setBy(), Conflicts: m.conflicts()}
	if !hasShadow {
		return cfg, tr, nil
	}
	tr.Shadow = &policy.Shadow{}
	shadow, err := s.eval(ctx, rules, act, true)
	if err != nil {
		tr.Shadow.Error = err.Error()
		return cfg, tr, nil
	}
	tr.Shadow.RulesFired = shadow.fired
	all := merge(enforced.fired != nil || shadow.fired != nil, interleave(enforced.contribs, shadow.contribs), nil)
	if would := config(&all, set); would != nil {
		tr.Shadow.Decision = would
		tr.Shadow.Changed = !reflect.DeepEqual(cfg, would)
	}
	return cfg, tr, nil
}

// firing is what one pass over a hook's rules produced: the rules that
// fired and the values they set, in rule order.
type firing struct {
	fired    []string
	contribs []contribution
}

// eval runs the rules whose shadow flag is shadow, in order, collecting the
// values each fired rule sets.
func (s *Set) eval(ctx context.Context, rules []*rule, act *activation, shadow bool) (firing, error) {
	frame, err := interpreter.NewExecutionFrame(act)
	if err != nil {
		return firing{}, &policy.Error{Code: policy.CodeEval, Message: "starting evaluation: " + err.Error()}
	}
	r := &run{ctx: ctx, act: act, frame: frame, timeout: s.opts.EvalTimeout}
	defer r.close()
	var out firing
	for _, rl := range rules {
		if rl.shadow != shadow {
			continue
		}
		if rl.when != nil {
			v, err := rl.when.eval(r, rl.id, "")
			if err != nil {
				return firing{}, err
			}
			b, ok := v.(types.Bool)
			if !ok {
				return firing{}, rl.when.fail(rl.id, "", policy.CodeEval, fmt.Sprintf("when must be bool but evaluated to %s", typeName(v)))
			}
			if !b {
				continue
			}
		}
		if out.fired == nil {
			out.fired = make([]string, 0, len(rules))
			out.contribs = make([]contribution, 0, max(8, len(rules)))
		}
		out.fired = append(out.fired, rl.id)
		for _, set := range rl.sets {
			d, err := set.decode(r, rl.id)
			if err != nil {
				return firing{}, err
			}
			out.contribs = append(out.contribs, contribution{rule: rl, field: set.field, value: d})
		}
	}
	return out, nil
}

// run is one hook evaluation: its activation and the cel-go execution frame
// its expressions share (a frame per expression costs allocations). The
// first expression with loops arms the evaluation's deadline and the
// frame's interrupt checks; loop-free expressions never need them.
type run struct {
	ctx     context.Context
	act     *activation
	frame   *interpreter.ExecutionFrame
	timeout time.Duration
	armed   bool
	cancel  context.CancelFunc
}

// arm bounds the rest of the evaluation by the deadline (unless the
// caller's is sooner) and lets the frame's loops notice it.
func (r *run) arm() {
	if r.armed {
		return
	}
	r.armed = true
	if d, ok := r.ctx.Deadline(); !ok || time.Until(d) > r.timeout {
		r.ctx, r.cancel = context.WithTimeout(r.ctx, r.timeout)
	}
	// SetContext fails only on a child frame or a second call; r.frame is
	// neither.
	_ = r.frame.SetContext(r.ctx, interruptEvery)
}

func (r *run) close() {
	r.frame.Close()
	if r.cancel != nil {
		r.cancel()
	}
}

// decode evaluates a set entry and decodes the value for its field.
func (s *ruleSet) decode(r *run, ruleID string) (any, error) {
	if s.value != nil {
		return s.value, nil
	}
	v, err := s.expr.eval(r, ruleID, s.field.name)
	if err != nil {
		return nil, err
	}
	d, err := s.field.decode(v)
	if err != nil {
		return nil, s.expr.fail(ruleID, s.field.name, policy.CodeEval, fmt.Sprintf("field %s: %v", s.field.name, err))
	}
	return d, nil
}

// eval evaluates one expression, classifying failures: a cost-limit trip is
// CodeCost, a cancelled or expired context CodeTimeout, anything else
// CodeEval. A cost-tracked expression runs in a frame of its own, so its
// limit counts its own work only.
func (e *expr) eval(r *run, ruleID, field string) (ref.Val, error) {
	if e.constant != nil {
		return e.constant, nil
	}
	var (
		v   ref.Val
		err error
	)
	switch {
	case e.tracked:
		r.arm()
		v, _, err = e.prg.ContextEval(r.ctx, r.act)
	case e.loops:
		r.arm()
		v, _, err = e.prg.Eval(r.frame)
	default:
		v, _, err = e.prg.Eval(r.frame)
	}
	if err == nil {
		return v, nil
	}
	code := policy.CodeEval
	var cancelled interpreter.EvalCancelledError
	switch {
	case errors.As(err, &cancelled) && cancelled.Cause == interpreter.CostLimitExceeded:
		code = policy.CodeCost
	case errors.Is(err, interpreter.InterruptError{}) && !e.tracked:
		err = fmt.Errorf("%w: %w", err, context.Cause(r.ctx))
		code = policy.CodeTimeout
	case errors.As(err, &cancelled) || r.ctx.Err() != nil:
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
	// message is beforePersist's (persist.go), chatError onChatError's
	// error (chaterror.go); agent, sessionId, requestId, deadline and
	// aborted are both's (identityActivation).
	message, chatError          object
	agent, sessionID, requestID types.String
	deadline, now               types.Timestamp
	aborted                     types.Bool
	// stateVals are the declared state values read (the step's in
	// beforeStep, the turn's in beforeTurn), converted when first read.
	stateVals map[string]any
}

func newActivation(tc *engine.TurnContext, sc *engine.PrepareStepContext, p *engine.Principal, now time.Time) *activation {
	a := &activation{
		turn:      object{turnType, tc},
		principal: object{principalType, p},
		now:       types.Timestamp{Time: now},
	}
	if tc != nil {
		a.stateVals = tc.State
	}
	if sc != nil {
		a.step = object{stepType, sc}
		a.stateVals = sc.State
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
	case "message":
		return &a.message, a.message.ptr != nil
	case "agent":
		return a.agent, true
	case "sessionId":
		return a.sessionID, true
	case "requestId":
		return a.requestID, true
	case "deadline":
		return a.deadline, true
	case "aborted":
		return a.aborted, true
	case "error":
		return &a.chatError, a.chatError.ptr != nil
	case stateVariable:
		return stateValue(a.stateVals), true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// identityActivation binds beforePersist's and onChatError's variables
// but their message or error: id's, as the hook is called at now.
func identityActivation(id *engine.Identity, now time.Time) *activation {
	return &activation{
		principal: object{principalType, &id.Principal},
		agent:     types.String(id.Agent),
		sessionID: types.String(id.SessionID),
		requestID: types.String(id.RequestID),
		deadline:  types.Timestamp{Time: id.Deadline},
		aborted:   types.Bool(id.Aborted),
		now:       types.Timestamp{Time: now},
	}
}
