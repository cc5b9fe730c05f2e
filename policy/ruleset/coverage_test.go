package ruleset

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/turngate/turngate/policy"
)

// TestCELCoverage checks which CEL rules count as exercised: fired by a
// case, fired in shadow, or failing in an expectError case; the others are
// listed with their position. With no Rego modules, Rego is at 100%.
func TestCELCoverage(t *testing.T) {
	dir := rulesDir(t, map[string]string{
		"turn.yaml": `beforeTurn:
  - name: fired
    when: turn.continuation
    set: {model: '"fast"'}
  - name: fails
    when: turn.body.mode == "x"
    set: {maxSteps: '2'}
  - name: candidate
    shadow: true
    set: {maxSteps: '3'}
beforeStep:
  - name: untested
    set: {model: '"mini"'}
`,
		"turn_test.yaml": `cases:
  - name: fires, and the shadow candidate too
    hook: beforeTurn
    input: {turn: {continuation: true, body: {mode: y}}}
    expect: {model: fast, maxSteps: 3}
  - name: a missing body key fails
    hook: beforeTurn
    input: {turn: {continuation: true}}
    expectError: no such key
`,
	})
	rev := mustLoad(t, dir, Options{})
	results, cov, errs := rev.RunTestsCoverage(context.Background())
	if errs != nil || len(results) != 2 || !results[0].Passed || !results[1].Passed {
		t.Fatalf("results %+v, errors %v", results, errs)
	}
	want := CELCoverage{Rules: 4, Fired: 3, Percent: 75, NotFired: []CELRule{
		{Rule: "turn.yaml#untested", Location: policy.Location{File: filepath.Join(dir, "turn.yaml"), Line: 12, Column: 11}},
	}}
	if !reflect.DeepEqual(cov.CEL, want) {
		t.Errorf("cel coverage = %+v, want %+v", cov.CEL, want)
	}
	if cov.Rego.Percent != 100 || cov.Rego.CoverableLines != 0 || len(cov.Rego.Files) != 0 {
		t.Errorf("rego coverage = %+v, want nothing to cover", cov.Rego)
	}

	// The admin API's coverage of the live revision is the same, measured
	// once: a cancelled request's context does not cancel it.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	live, liveErrs := rev.LiveCoverage(cancelled)
	if liveErrs != nil || live == nil || !reflect.DeepEqual(live.CEL, want) {
		t.Fatalf("LiveCoverage = %+v, %v, want the CEL coverage above", live, liveErrs)
	}
	if again, _ := rev.LiveCoverage(context.Background()); again != live {
		t.Error("LiveCoverage measured again, want the first measurement kept")
	}
	if none, errs := mustLoad(t, rulesDir(t, map[string]string{"turn.yaml": "beforeTurn: []\n"}), Options{}).LiveCoverage(context.Background()); none != nil || errs != nil {
		t.Errorf("LiveCoverage without tests = %+v, %v, want nil", none, errs)
	}
}
