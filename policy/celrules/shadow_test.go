package celrules

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// guestsNoTools is a shadow rule that fires for the tenant guest.
const guestsNoTools = `
beforeTurn:
  - name: no-tools-for-guests
    shadow: true
    when: principal.tenant == "guest"
    set: {toolChoice: '"none"'}
`

// TestShadowRules evaluates rule sets with shadow rules and checks that the
// enforced outcome is exactly that of the same set without them, while
// Trace.Shadow reports what they would have done.
func TestShadowRules(t *testing.T) {
	enforced := file("a.yaml", `
beforeTurn:
  - name: cap-max-steps
    when: turn.maxSteps > 10
    set: {maxSteps: '10'}
  - name: fast-on-continuations
    when: turn.continuation
    set: {model: '"fast"'}
beforeStep:
  - name: search-first
    when: step.stepNumber == 0
    set: {activeTools: '["search", "read"]'}
`)
	for _, tc := range []struct {
		name   string
		shadow string // a file of shadow rules, evaluated after a.yaml
		hook   string
		input  *Input
		// want is the shadow outcome: the would-be decision's fields, the
		// shadow rules that fired, Changed and an error substring.
		want      map[string]any
		fired     []string
		changed   bool
		wantError string
	}{
		{
			name: "a tighter cap would change the decision",
			shadow: `
beforeTurn:
  - name: three-steps
    shadow: true
    when: '!("power" in principal.roles)'
    set: {maxSteps: '3'}
`,
			input:   &Input{Turn: &engine.TurnContext{MaxSteps: 50}},
			want:    map[string]any{"maxSteps": 3.0},
			fired:   []string{"z.yaml#three-steps"},
			changed: true,
		},
		{
			name: "a looser cap would not: the minimum is still enforced",
			shadow: `
beforeTurn:
  - name: twenty-steps
    shadow: true
    set: {maxSteps: '20'}
`,
			input: &Input{Turn: &engine.TurnContext{MaxSteps: 50}},
			want:  map[string]any{"maxSteps": 10.0},
			fired: []string{"z.yaml#twenty-steps"},
		},
		{
			name:    "a shadow rule that fires alone",
			shadow:  guestsNoTools,
			input:   &Input{Principal: &engine.Principal{Tenant: "guest"}},
			want:    map[string]any{"toolChoice": "none"},
			fired:   []string{"z.yaml#no-tools-for-guests"},
			changed: true,
		},
		{
			name:   "a shadow rule that does not fire",
			shadow: guestsNoTools,
			input:  &Input{Turn: &engine.TurnContext{MaxSteps: 50}},
			want:   map[string]any{"maxSteps": 10.0},
		},
		{
			name: "a failing shadow rule is reported, never enforced",
			shadow: `
beforeTurn:
  - name: reads-a-missing-key
    shadow: true
    when: turn.body.mode == "strict"
    set: {maxSteps: '1'}
`,
			input:     &Input{Turn: &engine.TurnContext{MaxSteps: 50}},
			wantError: "no such key: mode",
		},
		{
			name: "beforeStep: a narrower tool list",
			shadow: `
beforeStep:
  - name: read-only-tools
    shadow: true
    set: {activeTools: '["read"]'}
`,
			hook:    policy.HookBeforeStep,
			input:   &Input{Step: &engine.PrepareStepContext{}},
			want:    map[string]any{"activeTools": []any{"read"}},
			fired:   []string{"z.yaml#read-only-tools"},
			changed: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hook := tc.hook
			if hook == "" {
				hook = policy.HookBeforeTurn
			}
			with := mustCompile(t, enforced, file("z.yaml", tc.shadow))
			without := mustCompile(t, enforced)
			cfg, tr, err := with.Eval(context.Background(), hook, tc.input)
			if err != nil {
				t.Fatal(err)
			}
			wantCfg, wantTr, _ := without.Eval(context.Background(), hook, tc.input)
			if !reflect.DeepEqual(cfg, wantCfg) || !reflect.DeepEqual(tr.RulesFired, wantTr.RulesFired) ||
				!reflect.DeepEqual(tr.SetBy, wantTr.SetBy) || !reflect.DeepEqual(tr.Conflicts, wantTr.Conflicts) {
				t.Errorf("enforced outcome differs from the set without shadow rules:\n got %v %+v\nwant %v %+v", Fields(cfg), tr, Fields(wantCfg), wantTr)
			}
			sh := tr.Shadow
			if sh == nil {
				t.Fatal("no shadow outcome")
			}
			if tc.wantError != "" {
				if !strings.Contains(sh.Error, tc.wantError) || sh.Decision != nil {
					t.Errorf("shadow = %+v, want only an error containing %q", sh, tc.wantError)
				}
				return
			}
			if sh.Error != "" {
				t.Fatalf("shadow error: %s", sh.Error)
			}
			if got := Fields(sh.Decision); !reflect.DeepEqual(got, asJSON(t, tc.want)) {
				t.Errorf("shadow decision = %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(sh.RulesFired, tc.fired) || sh.Changed != tc.changed {
				t.Errorf("shadow fired %v changed %v, want %v %v", sh.RulesFired, sh.Changed, tc.fired, tc.changed)
			}
		})
	}
}

// TestShadowKeepsRuleOrder checks that the would-be decision merges shadow
// and enforced rules in evaluation order: a shadow model before a later
// enforced one loses, as it would if it were enforced.
func TestShadowKeepsRuleOrder(t *testing.T) {
	s := mustCompile(t,
		file("a.yaml", `
beforeTurn:
  - name: candidate-model
    shadow: true
    set: {model: '"candidate"'}
  - name: fast
    set: {model: '"fast"'}
`),
		file("b.yaml", `
beforeTurn:
  - name: later-candidate
    shadow: true
    when: turn.continuation
    set: {model: '"later"'}
`))
	cfg, tr, err := s.BeforeTurn(context.Background(), &engine.TurnContext{}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Model != "fast" || tr.Shadow.Changed || *tr.Shadow.Decision.(*engine.TurnConfig).Model != "fast" {
		t.Errorf("model %q, shadow %+v; want fast, unchanged", *cfg.Model, tr.Shadow)
	}
	_, tr, err = s.BeforeTurn(context.Background(), &engine.TurnContext{Continuation: true}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Shadow.Changed || *tr.Shadow.Decision.(*engine.TurnConfig).Model != "later" {
		t.Errorf("shadow %+v; want the later candidate", tr.Shadow)
	}
}

// TestShadowAbsent checks that a hook without shadow rules reports none,
// and that a failing enforced rule fails the hook before any shadow rule
// runs.
func TestShadowAbsent(t *testing.T) {
	s := mustCompile(t, file("a.yaml", `
beforeTurn:
  - name: strict
    when: turn.body.mode == "strict"
    set: {maxSteps: '1'}
beforeStep:
  - name: candidate
    shadow: true
    set: {model: '"mini"'}
`))
	if !s.HasBeforeStep() {
		t.Error("a hook with only shadow rules has rules to evaluate")
	}
	_, tr, err := s.BeforeTurn(context.Background(), &engine.TurnContext{Body: map[string]any{"mode": "lax"}}, epoch)
	if err != nil || tr.Shadow != nil {
		t.Errorf("shadow = %+v, err %v; want none", tr.Shadow, err)
	}
	if _, tr, err = s.BeforeTurn(context.Background(), &engine.TurnContext{}, epoch); err == nil || tr.Shadow != nil {
		t.Errorf("shadow = %+v, err %v; want an error and no shadow outcome", tr.Shadow, err)
	}
	cfg, tr, err := s.BeforeStep(context.Background(), &engine.PrepareStepContext{}, epoch)
	if err != nil || cfg != nil || tr.RulesFired != nil || !tr.Shadow.Changed {
		t.Errorf("cfg %v, trace %+v, err %v; want no overrides and a changed shadow decision", cfg, tr, err)
	}
}
