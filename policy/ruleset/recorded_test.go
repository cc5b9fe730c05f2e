package ruleset

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// inputless is a recorder that keeps no inputs.
type inputless struct{ records }

func (*inputless) RecordsInput() bool { return false }

// Every decision record carries the input its rules evaluated, also when
// the revision has no rules for the hook; evaluated again from the record
// as the audit log writes it, the input gives the same decision.
func TestRecordedInputReplays(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	full := mustLoad(t, rulesDir(t, defaultSet()), Options{Now: func() time.Time { return now }})
	celOnly := mustLoad(t, rulesDir(t, map[string]string{"turn.yaml": celTurn}), Options{})
	turn := &engine.TurnContext{Identity: identity, Continuation: true, MaxSteps: 10, Model: "big",
		Messages: []engine.ModelMessage{{Role: "user", Content: []engine.ContentPart{{Type: engine.ContentText, Text: "hi"}}}},
		Body:     map[string]any{"n": 5}}
	step := &engine.PrepareStepContext{Identity: identity, StepNumber: 0, Model: "big", ActiveTools: []string{"search", "read"}, Turn: turn}
	call := toolCall("delete", `{"path": "/tmp/x"}`, map[string]any{"mode": "read-only"})
	call.PreviousCalls = []engine.ToolCallRecord{{ToolCallID: "call-0", ToolName: "search", Input: json.RawMessage(`{"q":1}`), Decision: engine.DecisionAllow, Success: true}}
	call.Messages = make([]engine.ModelMessage, 4)
	for _, tc := range []struct {
		name    string
		rev     *Revision
		hook    string
		arg     any
		outcome string
	}{
		{"beforeTurn", full, policy.HookBeforeTurn, turn, policy.OutcomeMatched},
		{"beforeStep", full, policy.HookBeforeStep, step, policy.OutcomeMatched},
		{"beforeToolCall", full, policy.HookBeforeToolCall, call, policy.OutcomeMatched},
		{"toolResult", full, policy.HookToolResult, toolResult("read", `{"ok": 1}`), policy.OutcomeNoMatch},
		{"beforeToolCall without rules", celOnly, policy.HookBeforeToolCall, call, policy.OutcomeNotEvaluated},
		{"beforeStep without rules", celOnly, policy.HookBeforeStep, step, policy.OutcomeNotEvaluated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs records
			if _, err := callHook(tc.rev.Hooks(&recs, FailClosed), tc.hook, tc.arg); err != nil {
				t.Fatal(err)
			}
			rec := recs.last(t)
			if rec.Outcome != tc.outcome || len(rec.Input) == 0 {
				t.Fatalf("outcome %s with input %s, want %s with an input", rec.Outcome, rec.Input, tc.outcome)
			}
			var written policy.Record // as the audit log writes and replay reads it
			if err := json.Unmarshal([]byte(mustJSON(t, rec)), &written); err != nil {
				t.Fatal(err)
			}
			res, err := full.EvalRecorded(context.Background(), written.Hook, written.Input)
			if err != nil {
				t.Fatal(err)
			}
			again, err := tc.rev.EvalRecorded(context.Background(), written.Hook, written.Input)
			if err != nil {
				t.Fatal(err)
			}
			if string(again.Input) != string(rec.Input) {
				t.Errorf("input evaluated again:\n got %s\nwant %s", again.Input, rec.Input)
			}
			if again.Outcome != rec.Outcome || mustJSON(t, again.Result) != mustJSON(t, rec.Decision) ||
				mustJSON(t, again.RulesFired) != mustJSON(t, nonNil(rec.RulesFired)) {
				t.Errorf("evaluated again: %s %s %v, recorded: %s %s %v", again.Outcome, mustJSON(t, again.Result), again.RulesFired,
					rec.Outcome, mustJSON(t, rec.Decision), rec.RulesFired)
			}
			if res.Outcome == policy.OutcomeError || res.Outcome == policy.OutcomeNotEvaluated {
				t.Errorf("the full rule set on the recorded input: %s %s", res.Outcome, res.Error)
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// A toolResult record whose rules redacted the output carries no input:
// the input holds the output before redaction, which the audit log must
// never see. A dry run still shows it.
func TestRedactedResultRecordsNoInput(t *testing.T) {
	rev := mustLoad(t, rulesDir(t, defaultSet()), Options{})
	var recs records
	rc := toolResult("read", `{"secret": "hunter2"}`)
	if _, err := rev.Hooks(&recs, FailClosed).ToolResult(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	if rec := recs.last(t); rec.Outcome != policy.OutcomeMatched || rec.Input != nil {
		t.Errorf("outcome %s, input %s; want matched without input", rec.Outcome, rec.Input)
	}
	res, err := rev.Eval(context.Background(), policy.HookToolResult, []byte(mustJSON(t, rc)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Input), "hunter2") {
		t.Errorf("eval input = %s, want the output as the rules saw it", res.Input)
	}
}

// A recorder that keeps no inputs gets records without them.
func TestRecordInputOff(t *testing.T) {
	rev := mustLoad(t, rulesDir(t, defaultSet()), Options{})
	var recs inputless
	if _, err := rev.Hooks(&recs, FailClosed).BeforeToolCall(context.Background(), toolCall("delete", `{}`, nil)); err != nil {
		t.Fatal(err)
	}
	if in := recs.last(t).Input; in != nil {
		t.Errorf("input = %s, want none", in)
	}
}
