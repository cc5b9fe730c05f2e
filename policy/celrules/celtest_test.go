package celrules

import (
	"context"
	"strings"
	"testing"

	"github.com/turngate/turngate/policy"
)

// TestRunTestsReportsFailures checks that failing cases say why, with the
// case's position.
func TestRunTestsReportsFailures(t *testing.T) {
	set := mustCompile(t, file("r.yaml", `
beforeTurn:
  - name: cheap
    when: turn.continuation
    set: {model: '"fast"', maxSteps: "2"}
  - name: needs-body
    when: turn.model == "explode"
    set: {system: turn.body.missing}
  - name: candidate-cap
    shadow: true
    when: turn.continuation
    set: {maxSteps: "1"}
`))
	results, errs := RunTests(set, []policy.File{file("r_test.yaml", `cases:
  - name: passes
    hook: beforeTurn
    input: {turn: {continuation: true}}
    expect: {model: fast}
  - name: wrong value
    hook: beforeTurn
    input: {turn: {continuation: true}}
    expect: {model: slow, maxSteps: 2}
  - name: field not set
    hook: beforeTurn
    input: {turn: {continuation: true}}
    expect: {temperature: 0.5}
  - name: unexpected match
    hook: beforeTurn
    input: {turn: {continuation: true}}
    expectNoMatch: true
  - name: error expected and found
    hook: beforeTurn
    input: {turn: {model: explode}}
    expectError: no such key
  - name: error expected, none found
    hook: beforeTurn
    input: {}
    expectError: boom
  - name: unexpected error
    hook: beforeTurn
    input: {turn: {model: explode}}
    expect: {model: fast}
  - name: the shadow rule counts, as it will once promoted
    hook: beforeTurn
    input: {turn: {continuation: true}}
    expect: {maxSteps: 1, model: fast}
  - name: the decision without the shadow rule is not what tests see
    hook: beforeTurn
    input: {turn: {continuation: true}}
    expect: {maxSteps: 2}
`)})
	if errs != nil {
		t.Fatal(errs)
	}
	want := []struct {
		name, msg string
		line      int
	}{
		{"passes", "", 2},
		{"wrong value", `field model: want "slow", got "fast" (set by r.yaml#cheap)`, 6},
		{"field not set", "field temperature: not set", 10},
		{"unexpected match", "want no rule to fire, got r.yaml#cheap", 14},
		{"error expected and found", "", 18},
		{"error expected, none found", `want an error containing "boom", got none`, 22},
		{"unexpected error", "evaluation failed:", 26},
		{"the shadow rule counts, as it will once promoted", "", 30},
		{"the decision without the shadow rule is not what tests see", "field maxSteps: want 2, got 1 (set by r.yaml#candidate-cap)", 34},
	}
	if len(results) != len(want) {
		t.Fatalf("got %d results, want %d", len(results), len(want))
	}
	for i, w := range want {
		r := results[i]
		if r.Name != w.name || r.Passed != (w.msg == "") || !strings.Contains(r.Message, w.msg) || r.Location.Line != w.line || r.File != "r_test.yaml" {
			t.Errorf("case %d = %+v, want %s at line %d with %q", i, r, w.name, w.line, w.msg)
		}
	}
}

func TestRunTestsMalformed(t *testing.T) {
	set := mustCompile(t)
	_, errs := RunTests(set, []policy.File{file("bad_test.yaml", `cases:
  - name: no hook
    input: {}
    expectNoMatch: true
  - name: two outcomes
    hook: beforeTurn
    expectNoMatch: true
    expectError: x
  - name: bad input
    hook: beforeTurn
    input: {turn: {contination: true}}
    expectNoMatch: true
  - name: unknown expect field
    hook: beforeStep
    expect: {maxStep: 3}
  - name: typo
    hook: beforeTurn
    expectNoMatch: true
    expct: {}
  - name: the shadow outcome apart
    hook: beforeTurn
    expectNoMatch: true
    expectShadow: {model: fast}
other: 1
`)})
	var got []string
	for _, e := range errs {
		got = append(got, e.Location.String()+" "+e.Message)
	}
	want := []string{
		`bad_test.yaml:2:5 test case "no hook" is missing its hook`,
		`bad_test.yaml:5:5 test case "two outcomes" needs exactly one of expect, expectNoMatch or expectError`,
		`bad_test.yaml:11:12 input: decoding input: json: unknown field "contination"`,
		`bad_test.yaml:15:13 expect: unknown field "maxStep"`,
		`bad_test.yaml:19:5 unknown test case key "expct" (want name, hook, input, expect, expectNoMatch or expectError)`,
		`bad_test.yaml:23:5 expectShadow is gone: test cases see shadow rules as enforced, as Rego tests do (rules/README.md, "Shadow rules"), so expect checks what expectShadow did; move its fields into expect`,
		`bad_test.yaml:24:1 unknown top-level key "other" (want cases)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDecodeInput(t *testing.T) {
	in, err := DecodeInput([]byte(`{
  "turn": {"model": "big", "sessionId": "s1", "body": {"mode": "x"}, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
  "step": {"stepNumber": 2, "activeTools": ["search"]},
  "principal": {"tenant": "acme", "roles": ["admin"]},
  "now": "2025-06-01T12:00:00Z"
}`))
	if err != nil {
		t.Fatal(err)
	}
	tc := in.TurnContext()
	if tc.Model != "big" || tc.SessionID != "s1" || tc.Principal.Tenant != "acme" || tc.Messages[0].Text() != "hi" {
		t.Errorf("turn = %+v", tc)
	}
	sc := in.StepContext()
	if sc.StepNumber != 2 || sc.Turn != tc || sc.Principal.Roles[0] != "admin" {
		t.Errorf("step = %+v", sc)
	}
	if in.Clock().Year() != 2025 {
		t.Errorf("now = %v", in.Clock())
	}
	set := mustCompile(t, file("r.yaml", `
beforeStep:
  - name: admins-at-step-2
    when: step.stepNumber == 2 && "admin" in principal.roles && turn.body.mode == "x" && now.getFullYear() == 2025
    set: {model: '"fast"'}
`))
	cfg, tr, err := set.Eval(context.Background(), policy.HookBeforeStep, in)
	if err != nil || Fields(cfg)["model"] != "fast" || len(tr.RulesFired) != 1 {
		t.Errorf("Eval = %v, %+v, %v", Fields(cfg), tr, err)
	}
	if cfg, _, err := set.Eval(context.Background(), policy.HookBeforeTurn, in); cfg != nil || err != nil {
		t.Errorf("beforeTurn without rules = %v, %v", cfg, err)
	}
	if _, _, err := set.Eval(context.Background(), "afterTurn", in); err == nil {
		t.Error("unknown hook accepted")
	}
	for _, bad := range []string{`{"turn": {"modle": "x"}}`, `turn: [1`, `now: yesterday`, "turn: {}\n---\nturn: {}\n"} {
		if _, err := DecodeInput([]byte(bad)); err == nil {
			t.Errorf("DecodeInput(%q) succeeded", bad)
		}
	}
	if in, err := DecodeInput([]byte(`turn: {continuation: true}`)); err != nil || !in.TurnContext().Continuation {
		t.Error(in, err)
	}
	if in, err := DecodeInput([]byte(`step: {stepNumber: 3}`)); err != nil || in.StepContext().StepNumber != 3 {
		t.Error(in, err)
	}
}
