package celrules

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
)

// capSteps is the shipped rules/turn.yaml#cap-max-steps.
const capSteps = `
beforeTurn:
  - name: cap-max-steps
    when: turn.maxSteps > 10
    set:
      maxSteps: '10'
`

// threeStepsUnlessPower is the rule, in steps.yaml.
const threeStepsUnlessPower = `
beforeTurn:
  - name: three-steps-unless-power
    when: '!("power" in principal.roles)'
    set:
      maxSteps: '3'
`

// conflictSummary is a policy.Conflict with its rules named by rule name
// and sorted, so it reads the same in either file order.
type conflictSummary struct {
	Field, Resolution string
	Rules             string
}

func summarize(cs []policy.Conflict) []conflictSummary {
	var out []conflictSummary
	for _, c := range cs {
		names := make([]string, len(c.Rules))
		for i, r := range c.Rules {
			names[i] = ruleName(r)
		}
		slices.Sort(names)
		out = append(out, conflictSummary{c.Field, c.Resolution, strings.Join(names, ",")})
	}
	return out
}

// ruleName strips the file from a rule id.
func ruleName(id string) string { return id[strings.IndexByte(id, '#')+1:] }

// TestRestrictiveFieldsIgnoreFileOrder evaluates two rule files in both
// orders: restrictive fields combine to the most restrictive value, setBy
// names the rule whose value won, and the disagreement is a conflict.
func TestRestrictiveFieldsIgnoreFileOrder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		x, y      string // two rule files' beforeTurn rules
		input     *Input
		hook      string            // default beforeTurn
		want      map[string]any    // Fields of the result
		wantSetBy map[string]string // field → rule name, checked when set
		conflicts []conflictSummary // as summarize renders them
	}{
		{
			name:      "the issue: maxSteps 3 unless power, beside cap-max-steps",
			x:         capSteps,
			y:         threeStepsUnlessPower,
			input:     &Input{Turn: &engine.TurnContext{MaxSteps: 50}},
			want:      map[string]any{"maxSteps": 3.0},
			wantSetBy: map[string]string{"maxSteps": "three-steps-unless-power"},
			conflicts: []conflictSummary{{"maxSteps", "min", "cap-max-steps,three-steps-unless-power"}},
		},
		{
			name:      "the issue, for a power user: the cap alone",
			x:         capSteps,
			y:         threeStepsUnlessPower,
			input:     &Input{Turn: &engine.TurnContext{MaxSteps: 50}, Principal: &engine.Principal{Roles: []string{"power"}}},
			want:      map[string]any{"maxSteps": 10.0},
			wantSetBy: map[string]string{"maxSteps": "cap-max-steps"},
		},
		{
			name: "maxOutputTokens and maxRetries take the minimum",
			x: `
beforeTurn:
  - name: x
    set: {maxOutputTokens: '4096', maxRetries: '0'}
`,
			y: `
beforeTurn:
  - name: y
    set: {maxOutputTokens: '1024', maxRetries: '2'}
`,
			want:      map[string]any{"maxOutputTokens": 1024.0, "maxRetries": 0.0},
			wantSetBy: map[string]string{"maxOutputTokens": "y", "maxRetries": "x"},
			conflicts: []conflictSummary{{"maxOutputTokens", "min", "x,y"}, {"maxRetries", "min", "x,y"}},
		},
		{
			name: "equal values are no conflict",
			x:    "beforeTurn: [{name: x, set: {maxSteps: '5'}}]",
			y:    "beforeTurn: [{name: y, set: {maxSteps: '5'}}]",
			want: map[string]any{"maxSteps": 5.0},
		},
		{
			name: "timeout: each bound takes the smaller, an unset bound is no bound",
			x: `
beforeTurn:
  - name: x
    set: {timeout: '{"totalMs": 30000, "chunkMs": 5000}'}
`,
			y: `
beforeTurn:
  - name: y
    set: {timeout: '{"totalMs": 10000}'}
`,
			want:      map[string]any{"timeout": map[string]any{"totalMs": 10000.0, "chunkMs": 5000.0}},
			wantSetBy: map[string]string{"timeout.totalMs": "y", "timeout.chunkMs": "x"},
			conflicts: []conflictSummary{{"timeout", "min", "x,y"}},
		},
		{
			name: "timeout: bounds on different components compose without conflict",
			x:    `beforeTurn: [{name: x, set: {timeout: '{"totalMs": 30000}'}}]`,
			y:    `beforeTurn: [{name: y, set: {timeout: '{"chunkMs": 5000}'}}]`,
			want: map[string]any{"timeout": map[string]any{"totalMs": 30000.0, "chunkMs": 5000.0}},
		},
		{
			name:      "activeTools: the intersection, sorted",
			x:         `beforeTurn: [{name: x, set: {activeTools: '["write", "search", "read"]'}}]`,
			y:         `beforeTurn: [{name: y, set: {activeTools: '["search", "delete", "read"]'}}]`,
			want:      map[string]any{"activeTools": []any{"read", "search"}},
			conflicts: []conflictSummary{{"activeTools", "intersection", "x,y"}},
		},
		{
			name:      "activeTools: a subset wins and names its rule",
			x:         `beforeTurn: [{name: x, set: {activeTools: '["write", "search", "read"]'}}]`,
			y:         `beforeTurn: [{name: y, set: {activeTools: '["read"]'}}]`,
			want:      map[string]any{"activeTools": []any{"read"}},
			wantSetBy: map[string]string{"activeTools": "y"},
			conflicts: []conflictSummary{{"activeTools", "intersection", "x,y"}},
		},
		{
			name:      "activeTools in beforeStep too",
			hook:      policy.HookBeforeStep,
			x:         `beforeStep: [{name: x, set: {activeTools: '["search", "read"]'}}]`,
			y:         `beforeStep: [{name: y, set: {activeTools: '["delete"]'}}]`,
			want:      map[string]any{"activeTools": []any{}},
			conflicts: []conflictSummary{{"activeTools", "intersection", "x,y"}},
		},
		{
			name:      "toolChoice none wins",
			x:         `beforeTurn: [{name: x, set: {toolChoice: '"none"'}}]`,
			y:         `beforeTurn: [{name: y, set: {toolChoice: '{"type": "tool", "toolName": "search"}'}}]`,
			want:      map[string]any{"toolChoice": "none"},
			wantSetBy: map[string]string{"toolChoice": "x"},
			conflicts: []conflictSummary{{"toolChoice", "none-wins", "x,y"}},
		},
		{
			name:      "toolChoice none wins in beforeStep",
			hook:      policy.HookBeforeStep,
			x:         `beforeStep: [{name: x, set: {toolChoice: '"required"'}}]`,
			y:         `beforeStep: [{name: y, set: {toolChoice: '"none"'}}]`,
			want:      map[string]any{"toolChoice": "none"},
			wantSetBy: map[string]string{"toolChoice": "y"},
			conflicts: []conflictSummary{{"toolChoice", "none-wins", "x,y"}},
		},
	} {
		for _, order := range []struct{ name, a, b string }{{"x first", tc.x, tc.y}, {"y first", tc.y, tc.x}} {
			t.Run(tc.name+"/"+order.name, func(t *testing.T) {
				s := mustCompile(t, file("a.yaml", order.a), file("b.yaml", order.b))
				hook := tc.hook
				if hook == "" {
					hook = policy.HookBeforeTurn
				}
				in := tc.input
				if in == nil {
					in = &Input{}
				}
				cfg, tr, err := s.Eval(context.Background(), hook, in)
				if err != nil {
					t.Fatal(err)
				}
				if got := Fields(cfg); !reflect.DeepEqual(got, asJSON(t, tc.want)) {
					t.Errorf("fields = %v, want %v", got, tc.want)
				}
				for field, want := range tc.wantSetBy {
					if got := ruleName(tr.SetBy[field]); got != want {
						t.Errorf("setBy[%s] = %q, want %q (setBy %v)", field, got, want, tr.SetBy)
					}
				}
				if got := summarize(tr.Conflicts); !reflect.DeepEqual(got, tc.conflicts) {
					t.Errorf("conflicts = %v, want %v", got, tc.conflicts)
				}
			})
		}
	}
}

// asJSON normalises a want map as Fields renders values (numbers as
// float64, lists as []any).
func asJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(jsonText(v)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLastWinsConflicts checks that other fields keep "later wins" and that
// two rules disagreeing is recorded with every rule that set the field, in
// evaluation order.
func TestLastWinsConflicts(t *testing.T) {
	s := mustCompile(t,
		file("a.yaml", `
beforeTurn:
  - name: fast
    set: {model: '"fast"', temperature: '0.2', stopWhen: stepCountIs(5)}
  - name: also-fast
    set: {model: '"fast"'}
`),
		file("b.yaml", `
beforeTurn:
  - name: slow
    when: turn.continuation
    set: {model: '"slow"', temperature: '0.2', stopWhen: hasToolCall("done")}
`))
	cfg, tr, err := s.BeforeTurn(context.Background(), &engine.TurnContext{Continuation: true}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Model != "slow" || len(cfg.StopWhen) != 2 {
		t.Errorf("model %q, stopWhen %v; want slow and both conditions", *cfg.Model, cfg.StopWhen)
	}
	want := []policy.Conflict{{Field: "model", Rules: []string{"a.yaml#fast", "a.yaml#also-fast", "b.yaml#slow"}, Resolution: "last-wins"}}
	if !reflect.DeepEqual(tr.Conflicts, want) {
		t.Errorf("conflicts = %+v, want %+v", tr.Conflicts, want)
	}
	if tr.SetBy["model"] != "b.yaml#slow" || tr.SetBy["stopWhen"] != "b.yaml#slow" {
		t.Errorf("setBy = %v", tr.SetBy)
	}
	// Without the continuation, the two agreeing rules are no conflict.
	_, tr, err = s.BeforeTurn(context.Background(), &engine.TurnContext{}, epoch)
	if err != nil || tr.Conflicts != nil || tr.SetBy["model"] != "a.yaml#also-fast" {
		t.Errorf("conflicts %v, setBy %v, err %v; want none and also-fast", tr.Conflicts, tr.SetBy, err)
	}
}

// TestConflictWarnings compiles each rule file of testdata/warn and
// compares the conflict warnings (statically visible last-wins conflicts)
// with its golden file.
func TestConflictWarnings(t *testing.T) {
	paths, err := filepath.Glob("testdata/warn/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		t.Run(name, func(t *testing.T) {
			s, errs := Compile(readFiles(t, p), Options{})
			if errs != nil {
				t.Fatal(errs)
			}
			golden.Check(t, filepath.Join("testdata", "warn", name+".golden"), golden.Errors(s.Warnings()))
		})
	}
}
