package ruleset

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/celrules"
)

// celChatError masks rate limits with one text and leaves the other
// classes alone.
const celChatError = `onChatError:
  - name: busy
    when: error.class == "rate_limit"
    set:
      message: '"The assistant is busy; try again in a minute."'
`

// TestOnChatErrorRules runs onChatError rules on failures of each class:
// the text a rule chose, the record (its class, its input) and the replay
// of that record on the same and on another revision.
func TestOnChatErrorRules(t *testing.T) {
	rev := mustLoad(t, rulesDir(t, map[string]string{"errors.yaml": celChatError, "errors_test.yaml": `cases:
  - name: rate limits are busy
    hook: onChatError
    input: {error: {stage: stream, class: rate_limit, message: "429 slow down"}}
    expect: {message: "The assistant is busy; try again in a minute."}
  - name: fatal errors keep the default
    hook: onChatError
    input: {error: {stage: stream, class: fatal, message: "401 bad key"}}
    expectNoMatch: true
`}), Options{})
	if results, errs := rev.RunTests(context.Background()); errs != nil || len(results) != 2 || !results[0].Passed || !results[1].Passed {
		t.Fatalf("RunTests = %+v, %v; want both onChatError cases to pass", results, errs)
	}
	other := mustLoad(t, rulesDir(t, map[string]string{"errors.yaml": strings.ReplaceAll(celChatError, "try again in a minute", "come back later")}), Options{})
	id := engine.Identity{RequestID: "r1", SessionID: "s1", Agent: "a", Principal: engine.Principal{Tenant: "acme", Subject: "ann"}}
	tests := []struct {
		name, class string
		want        string // the text chosen; "" keeps the default
		outcome     string
	}{
		{"rate limit", engine.ClassRateLimit, "The assistant is busy; try again in a minute.", policy.OutcomeMatched},
		{"fatal", engine.ClassFatal, "", policy.OutcomeNoMatch},
		{"transient", engine.ClassTransient, "", policy.OutcomeNoMatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec *policy.Record
			h := rev.Hooks(policy.RecorderFunc(func(r *policy.Record) { rec = r }), FailClosed)
			got := h.OnChatError(context.Background(), &engine.ChatErrorContext{Identity: id, Stage: engine.StageStream,
				Message: "upstream said no", Class: tt.class})
			if text := errText(got); text != tt.want {
				t.Errorf("OnChatError = %q, want %q", text, tt.want)
			}
			if rec == nil {
				t.Fatal("no onChatError record")
			}
			if rec.Hook != policy.HookOnChatError || rec.ErrorClass != tt.class || rec.Outcome != tt.outcome || rec.RequestID != "r1" {
				t.Errorf("record %s", mustJSON(t, rec))
			}
			var in celrules.Input
			if err := json.Unmarshal(rec.Input, &in); err != nil || in.Error == nil || in.Error.Class != tt.class || in.RequestID != "r1" {
				t.Fatalf("record input %s (%v), want error.class %s and requestId r1", rec.Input, err, tt.class)
			}
			for _, replay := range []struct {
				rev  *Revision
				want string
			}{{rev, tt.want}, {other, strings.ReplaceAll(tt.want, "try again in a minute", "come back later")}} {
				res, err := replay.rev.EvalRecorded(context.Background(), rec.Hook, rec.Input)
				if err != nil {
					t.Fatal(err)
				}
				var d celrules.ChatErrorDecision
				if res.Result != nil {
					d = *res.Result.(*celrules.ChatErrorDecision)
				}
				if d.Message != replay.want || res.Outcome != tt.outcome {
					t.Errorf("replayed: %s, want message %q", mustJSON(t, res), replay.want)
				}
			}
		})
	}
}

// errText is an onChatError replacement's text; "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestOnChatErrorTyped checks that onChatError rules are type-checked: a
// misspelt error field or a variable of another hook is a positioned load
// error, a message of another type or an empty one too, and a revision
// without onChatError rules records nothing.
func TestOnChatErrorTyped(t *testing.T) {
	tests := []struct {
		name, rules string
		want        string
		line        int
	}{
		{"misspelt field", "onChatError:\n  - name: x\n    when: error.clas == \"rate_limit\"\n    set: {message: '\"busy\"'}\n",
			"did you mean error.class?", 3},
		{"turn is not there", "onChatError:\n  - name: x\n    when: turn.continuation\n    set: {message: '\"busy\"'}\n",
			"onChatError rules see error, principal, agent, sessionId, requestId, deadline, aborted and now", 3},
		{"message must be a string", "onChatError:\n  - name: x\n    set: {message: '429'}\n",
			"field message must be string but expression is int", 3},
		{"empty message", "onChatError:\n  - name: x\n    set: {message: '\"  \"'}\n",
			"message needs a non-empty text", 3},
		{"unknown field", "onChatError:\n  - name: x\n    set: {maxSteps: '3'}\n",
			`unknown field "maxSteps" for onChatError (want one of: message)`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Load(rulesDir(t, map[string]string{"errors.yaml": tt.rules}), Options{})
			if len(errs) != 1 || !strings.Contains(errs[0].Message, tt.want) || errs[0].Location.Line != tt.line {
				t.Fatalf("Load errors %v, want one at line %d saying %q", errs, tt.line, tt.want)
			}
		})
	}
	var recs []*policy.Record
	h := mustLoad(t, rulesDir(t, map[string]string{"10-turn.yaml": celTurn}), Options{}).
		Hooks(policy.RecorderFunc(func(r *policy.Record) { recs = append(recs, r) }), FailClosed)
	if err := h.OnChatError(context.Background(), &engine.ChatErrorContext{Class: engine.ClassFatal}); err != nil || recs != nil {
		t.Errorf("without onChatError rules: %v, records %v", err, recs)
	}
}
