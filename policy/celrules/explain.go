package celrules

import (
	"context"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// WhyNotTurn lists the beforeTurn rules (enforced and shadow) whose when
// did not hold for tc: false, not a bool, or an error. It is a separate
// evaluation, for dry runs only; at most policy.MaxNotFired rules.
func (s *Set) WhyNotTurn(ctx context.Context, tc *engine.TurnContext, now time.Time) []policy.NotFired {
	return s.whyNot(ctx, s.turnRules, newActivation(tc, nil, &tc.Principal, now))
}

// WhyNotStep is WhyNotTurn for the beforeStep rules.
func (s *Set) WhyNotStep(ctx context.Context, sc *engine.PrepareStepContext, now time.Time) []policy.NotFired {
	return s.whyNot(ctx, s.stepRules, stepActivation(sc, now))
}

// WhyNotPersist is WhyNotTurn for the beforePersist rules on the message
// m of the turn id.
func (s *Set) WhyNotPersist(ctx context.Context, id *engine.Identity, m *engine.UIMessage, now time.Time) []policy.NotFired {
	return s.whyNot(ctx, s.persistRules, persistActivation(id, m, now))
}

// WhyNotChatError is WhyNotTurn for the onChatError rules on the failure e.
func (s *Set) WhyNotChatError(ctx context.Context, e *engine.ChatErrorContext, now time.Time) []policy.NotFired {
	ce := NewChatError(e)
	return s.whyNot(ctx, s.errorRules, errorActivation(&e.Identity, &ce, now))
}

func (s *Set) whyNot(ctx context.Context, rules []*rule, act *activation) []policy.NotFired {
	frame, err := interpreter.NewExecutionFrame(act)
	if err != nil {
		return nil
	}
	r := &run{ctx: ctx, act: act, frame: frame, timeout: s.opts.EvalTimeout}
	defer r.close()
	out := []policy.NotFired{}
	for _, rl := range rules {
		if rl.when == nil || len(out) == policy.MaxNotFired {
			continue
		}
		var value string
		v, err := rl.when.eval(r, rl.id, "")
		switch b, ok := v.(types.Bool); {
		case err != nil:
			value = "error: " + err.Error()
		case ok && bool(b):
			continue
		case ok:
			value = "false"
		default:
			value = "not a bool: " + typeName(v)
		}
		out = append(out, policy.NotFired{Rule: rl.id, Location: rl.when.loc, When: rl.when.text, Value: value})
	}
	return out
}
