package ruleset

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// stepsCap is the rule: maxSteps 3 unless the principal has the
// role power.
const stepsCap = `beforeTurn:
  - name: three-steps-unless-power
    when: '!("power" in principal.roles)'
    set:
      maxSteps: '3'
`

// TestCapsComposeInAnyFileOrder loads the shipped turn.yaml (whose
// cap-max-steps sets 10) beside the steps rule, under a name that
// sorts before it and one that sorts after: the turn gets 3 either way, the
// record names the winning rule and the conflict.
func TestCapsComposeInAnyFileOrder(t *testing.T) {
	shipped, err := os.ReadFile("../../rules/turn.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"steps.yaml", "zz_steps.yaml"} {
		t.Run(name, func(t *testing.T) {
			rev := mustLoad(t, rulesDir(t, map[string]string{"turn.yaml": string(shipped), name: stepsCap}), Options{})
			var rec records
			h := rev.Hooks(&rec, FailClosed)
			cfg, err := h.BeforeTurn(context.Background(), &engine.TurnContext{Identity: identity, MaxSteps: 50})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MaxSteps == nil || *cfg.MaxSteps != 3 {
				t.Fatalf("maxSteps = %v, want 3", cfg.MaxSteps)
			}
			r := rec.last(t)
			steps := name + "#three-steps-unless-power"
			if r.SetBy["maxSteps"] != steps {
				t.Errorf("setBy = %v, want maxSteps by %s", r.SetBy, steps)
			}
			if len(r.Conflicts) != 1 || r.Conflicts[0].Field != "maxSteps" || r.Conflicts[0].Resolution != "min" || len(r.Conflicts[0].Rules) != 2 {
				t.Errorf("conflicts = %+v, want maxSteps resolved by min between two rules", r.Conflicts)
			}

			power := &engine.TurnContext{Identity: identity, MaxSteps: 50}
			power.Principal.Roles = []string{"power"}
			if cfg, err = h.BeforeTurn(context.Background(), power); err != nil || *cfg.MaxSteps != 10 {
				t.Errorf("power user: maxSteps %v, err %v; want the shipped cap, 10", cfg.MaxSteps, err)
			}
		})
	}
}

// TestShadowRuleRecord checks that a shadow rule's would-be effect is in
// the decision record and the dry-run result while the enforced decision
// is the one without it.
func TestShadowRuleRecord(t *testing.T) {
	candidate := `beforeTurn:
  - name: candidate-cap
    shadow: true
    set:
      maxSteps: '2'
`
	rev := mustLoad(t, rulesDir(t, map[string]string{"turn.yaml": celTurn, "candidate.yaml": candidate}), Options{})
	var rec records
	cfg, err := rev.Hooks(&rec, FailClosed).BeforeTurn(context.Background(), &engine.TurnContext{Identity: identity, Continuation: true})
	if err != nil || *cfg.MaxSteps != 3 {
		t.Fatalf("enforced maxSteps = %v, err %v; want 3", cfg.MaxSteps, err)
	}
	r := rec.last(t)
	if !reflect.DeepEqual(r.RulesFired, []string{"turn.yaml#continuation-cap"}) || r.Outcome != policy.OutcomeMatched {
		t.Errorf("record fired %v outcome %s; want only the enforced rule", r.RulesFired, r.Outcome)
	}
	sh := r.Shadow
	if sh == nil || !sh.Changed || !reflect.DeepEqual(sh.RulesFired, []string{"candidate.yaml#candidate-cap"}) ||
		*sh.Decision.(*engine.TurnConfig).MaxSteps != 2 {
		t.Errorf("record shadow = %+v, want candidate-cap's maxSteps 2", sh)
	}

	res, err := rev.Eval(context.Background(), policy.HookBeforeTurn, []byte(`{"turn": {"continuation": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, res); got != `{"hook":"beforeTurn","revision":"`+rev.ID()+`","outcome":"matched",`+
		`"result":{"maxSteps":3},"rulesFired":["turn.yaml#continuation-cap"],"rulesFiredAt":["turn.yaml:2"],"setBy":{"maxSteps":"turn.yaml#continuation-cap"},`+
		`"shadow":{"rulesFired":["candidate.yaml#candidate-cap"],"decision":{"maxSteps":2},"changed":true},`+
		`"input":{"turn":{"requestId":"","sessionId":"","agent":"","principal":{"tenant":"","subject":"","roles":null},"entryPath":"",`+
		`"system":"","messages":null,"tools":null,"model":"","continuation":true,"maxSteps":0},`+
		`"principal":{"tenant":"","subject":"","roles":null},"now":"1970-01-01T00:00:00Z"}}` {
		t.Errorf("eval result = %s", got)
	}
}
