package ruleset_test

import (
	"context"
	"encoding/json"
	"errors"
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
	for _, dir := range []string{"bad", "typo", "undeclared"} {
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
	if got := r.State().Len(); got != 3 {
		t.Fatalf("%d states declared, want 3", got)
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
	if got := r.StateReads(policy.HookBeforeTurn); len(got) != 1 || got[0].Name != "turns_per_minute" {
		t.Errorf("beforeTurn reads %v, want [turns_per_minute]", got)
	}
}

// TestStateCEL: beforeTurn rules read state.NAME from the turn's state;
// a recorded input without the state they read is not replayable.
func TestStateCEL(t *testing.T) {
	r, errs := ruleset.Load(filepath.Join("testdata", "state", "good"), ruleset.Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		input, want string
	}{
		{`{"turn": {"maxSteps": 10, "state": {"turns_per_minute": 31}}}`, "matched"},
		{`{"turn": {"maxSteps": 10, "state": {"turns_per_minute": 3}}}`, "no_match"},
	} {
		res, err := r.EvalRecorded(context.Background(), policy.HookBeforeTurn, json.RawMessage(tc.input))
		if err != nil || res.Outcome != tc.want {
			t.Errorf("%s: %+v, %v; want %s", tc.input, res, err, tc.want)
		}
	}
	for _, in := range []string{
		`{"turn": {"maxSteps": 10}}`,
		// Recorded under a declaration of another kind by that name.
		`{"turn": {"maxSteps": 10, "state": {"turns_per_minute": {"happened": true, "at": ""}}}}`,
	} {
		_, err := r.EvalRecorded(context.Background(), policy.HookBeforeTurn, json.RawMessage(in))
		if _, ok := errors.AsType[*ruleset.UnrecordedStateError](err); !ok {
			t.Errorf("%s: %v, want an UnrecordedStateError", in, err)
		}
	}
}
