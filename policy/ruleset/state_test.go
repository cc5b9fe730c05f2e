package ruleset_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

// TestStateLoadErrors: a broken declaration file and a rule reading a
// misspelt state name are load errors at their file:line:col, with a
// "did you mean" where a name is close.
func TestStateLoadErrors(t *testing.T) {
	for _, dir := range []string{"bad", "typo"} {
		t.Run(dir, func(t *testing.T) {
			_, errs := ruleset.Load(filepath.Join("testdata", "state", dir), ruleset.Options{})
			if errs == nil {
				t.Fatal("the rules loaded")
			}
			golden.Check(t, filepath.Join("testdata", "golden", "state_"+dir+".golden"), errs.Error()+"\n")
		})
	}
}

// TestStateReads: the revision reads for beforeToolCall exactly the
// states its Rego rules name, not every declared one.
func TestStateReads(t *testing.T) {
	r, errs := ruleset.Load(filepath.Join("testdata", "state", "good"), ruleset.Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	if got := r.State().Len(); got != 2 {
		t.Fatalf("%d states declared, want 2", got)
	}
	var names []string
	for _, d := range r.StateReads(policy.HookBeforeToolCall) {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"emails_per_hour"}) {
		t.Errorf("beforeToolCall reads %v, want [emails_per_hour]", names)
	}
	if got := r.StateReads(policy.HookToolResult); got != nil {
		t.Errorf("toolResult reads %v, want none", got)
	}
}
