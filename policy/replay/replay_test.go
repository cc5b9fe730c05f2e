package replay

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

// An approval is its own class: a change to or from it is X-to-approval
// or approval-to-X, and other reasons, approvers or input within it are
// approval-changed.
func TestReplayClassifiesApprovals(t *testing.T) {
	mk := func(decision string) Side {
		s := Side{Outcome: policy.OutcomeMatched}
		if decision != "" {
			s.Decision = json.RawMessage(decision)
		}
		return s
	}
	approval := `{"action":"approval","approvals":[{"reason":"moves money","approvers":["role:finance"]}]}`
	tests := []struct {
		old, cur string
		want     []string
	}{
		{"", approval, []string{"allow-to-approval"}},
		{approval, `{"action":"block","reason":"no"}`, []string{"approval-to-block"}},
		{approval, approval, nil},
		{approval, `{"action":"approval","approvals":[{"reason":"moves money","approvers":["role:ops"]}]}`, []string{"approval-changed"}},
		{approval, `{"action":"approval","input":{"amount":1},"approvals":[{"reason":"moves money","approvers":["role:finance"]}]}`, []string{"approval-changed"}},
	}
	for _, tt := range tests {
		if got := classify(policy.HookBeforeToolCall, mk(tt.old), mk(tt.cur)); !slices.Equal(got, tt.want) {
			t.Errorf("%s → %s: %q, want %q", tt.old, tt.cur, got, tt.want)
		}
	}
	for _, k := range []string{"allow-to-approval", "approval-to-block", "approval-changed"} {
		if !failOnKinds[k] {
			t.Errorf("--fail-on does not accept %s", k)
		}
	}
}

// An onChatError decision is a CEL hook's: another text is
// override-changed:message, a rule that no longer fires too, and a
// failed evaluation is its own class.
func TestReplayClassifiesChatErrors(t *testing.T) {
	side := func(outcome, decision string) Side {
		s := Side{Outcome: outcome}
		if decision != "" {
			s.Decision = json.RawMessage(decision)
		}
		return s
	}
	busy := side(policy.OutcomeMatched, `{"message":"busy"}`)
	tests := []struct {
		old, cur Side
		want     []string
	}{
		{busy, busy, nil},
		{busy, side(policy.OutcomeMatched, `{"message":"come back later"}`), []string{"override-changed:message"}},
		{busy, side(policy.OutcomeNoMatch, ""), []string{"override-changed:message"}},
		{busy, side(policy.OutcomeError, ""), []string{"ok-to-error"}},
	}
	for _, tt := range tests {
		if got := classify(policy.HookOnChatError, tt.old, tt.cur); !slices.Equal(got, tt.want) {
			t.Errorf("%s → %s: %q, want %q", tt.old.Decision, tt.cur.Decision, got, tt.want)
		}
	}
}

// Where a fired rule is defined (rulesFiredAt) is not a change: the same
// rule moved to another line replays unchanged.
func TestReplayIgnoresRuleLocations(t *testing.T) {
	load := func(src string) *ruleset.Revision {
		t.Helper()
		rev, errs := ruleset.LoadFS(fstest.MapFS{"tools.rego": &fstest.MapFile{Data: []byte(src)}}, ".", ruleset.Options{})
		if errs != nil {
			t.Fatal(errs)
		}
		return rev
	}
	const rule = "block contains \"no deletes\" if input.tool.name == \"delete\"\n"
	recorded := load("package turngate.tool_call\n\n" + rule)
	moved := load("package turngate.tool_call\n\n# moved down\n\n" + rule)
	var rec *policy.Record
	tc := &engine.ToolCallContext{Type: "tool-call", ToolCallID: "c1", ToolName: "delete", Input: json.RawMessage(`{}`),
		Tool: engine.ToolInfo{Name: "delete", Kind: engine.ToolKindBuiltin}}
	if _, err := recorded.Hooks(policy.RecorderFunc(func(r *policy.Record) { rec = r }), ruleset.FailClosed).BeforeToolCall(context.Background(), tc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.RulesFiredAt, []string{"tools.rego:3"}) {
		t.Fatalf("recorded at %q, want tools.rego:3", rec.RulesFiredAt)
	}
	r := New(moved, 5, nil)
	r.Add(context.Background(), rec, Where{ID: "1"})
	if rep := r.Report(nil); rep.Replayed != 1 || rep.Unchanged != 1 || rep.Changed != 0 {
		t.Errorf("the same rule on another line: %+v, want unchanged", rep)
	}
}
