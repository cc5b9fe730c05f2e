package ruleset

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/turngate/turngate/policy"
)

// TestExplain: an explained dry run lists the rules that did not fire with
// where and why; an unexplained one has no notFired member.
func TestExplain(t *testing.T) {
	rev := mustLoad(t, rulesDir(t, map[string]string{
		"turn.yaml": celTurn,
		"step.yaml": celStep,
		"tool_call.rego": regoToolCall + `
patch contains {"op": "add", "path": "/dryRun", "value": true} if {
	input.tool.name == "delete"
	input.body.mode == "preview"
}
`,
		"tool_result.rego": regoToolResult,
		"errors.yaml":      celChatError,
		"persist.yaml": `beforePersist:
  - name: mask-acme-emails
    when: principal.tenant == "acme"
    set:
      redact: '["[a-z]+@[a-z.]+"]'
`,
	}), Options{})
	loc := func(file string, line int) policy.Location { return policy.Location{File: file, Line: line} }
	tests := []struct {
		name, hook, input string
		want              []policy.NotFired
	}{
		{"cel when false", policy.HookBeforeTurn, `{"turn": {"continuation": false}}`, []policy.NotFired{
			{Rule: "turn.yaml#continuation-cap", Location: loc("turn.yaml", 3), When: "turn.continuation", Value: "false"}}},
		{"cel when true", policy.HookBeforeTurn, `{"turn": {"continuation": true}}`, []policy.NotFired{}},
		{"cel step", policy.HookBeforeStep, `{"step": {"stepNumber": 2}}`, []policy.NotFired{
			{Rule: "step.yaml#search-first", Location: loc("step.yaml", 3), When: "step.stepNumber == 0", Value: "false"}}},
		{"cel onChatError", policy.HookOnChatError, `{"error": {"stage": "stream", "class": "fatal", "message": "401"}}`, []policy.NotFired{
			{Rule: "errors.yaml#busy", Location: loc("errors.yaml", 3), When: `error.class == "rate_limit"`, Value: "false"}}},
		{"cel onChatError fired", policy.HookOnChatError, `{"error": {"stage": "stream", "class": "rate_limit", "message": "429"}}`, []policy.NotFired{}},
		{"cel beforePersist", policy.HookBeforePersist,
			`{"message": {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "bob@example.com"}]}, "principal": {"tenant": "globex"}}`,
			[]policy.NotFired{{Rule: "persist.yaml#mask-acme-emails", Location: loc("persist.yaml", 3), When: `principal.tenant == "acme"`, Value: "false"}}},
		{"rego: both rules fail on their second line", policy.HookBeforeToolCall,
			`{"toolName": "delete", "tool": {"name": "delete", "kind": "http"}, "input": {}, "body": {"mode": "write"}}`,
			[]policy.NotFired{
				{Rule: "data.turngate.tool_call.block", Location: loc("tool_call.rego", 5),
					Failed: `input.body.mode == "read-only"`, FailedAt: &policy.Location{File: "tool_call.rego", Line: 7}},
				{Rule: "data.turngate.tool_call.patch", Location: loc("tool_call.rego", 10),
					Failed: `input.body.mode == "preview"`, FailedAt: &policy.Location{File: "tool_call.rego", Line: 12}}}},
		{"rego: block fired, patch failed on its first line", policy.HookBeforeToolCall,
			`{"toolName": "delete", "tool": {"name": "delete", "kind": "http"}, "input": {}, "body": {"mode": "read-only"}}`,
			[]policy.NotFired{
				{Rule: "data.turngate.tool_call.patch", Location: loc("tool_call.rego", 10),
					Failed: `input.body.mode == "preview"`, FailedAt: &policy.Location{File: "tool_call.rego", Line: 12}}}},
		{"rego tool_result", policy.HookToolResult,
			`{"toolName": "t", "tool": {"name": "t", "kind": "http"}, "input": {}, "output": {"public": 1}}`,
			[]policy.NotFired{
				{Rule: "data.turngate.tool_result.redact", Location: loc("tool_result.rego", 5),
					Failed: "input.output.secret", FailedAt: &policy.Location{File: "tool_result.rego", Line: 5}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := rev.Eval(context.Background(), tt.hook, []byte(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if js := mustJSON(t, res); strings.Contains(js, "notFired") {
				t.Errorf("unexplained result has notFired: %s", js)
			}
			rev.Explain(context.Background(), res)
			// Columns are OPA's and cel-go's to count; lines are the contract.
			for i := range res.NotFired {
				res.NotFired[i].Location.Column = 0
				if res.NotFired[i].FailedAt != nil {
					res.NotFired[i].FailedAt.Column = 0
				}
			}
			if !reflect.DeepEqual(res.NotFired, tt.want) {
				got, _ := json.Marshal(res.NotFired)
				want, _ := json.Marshal(tt.want)
				t.Errorf("notFired\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestExplainBounded: an explanation lists at most policy.MaxNotFired rules.
func TestExplainBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("beforeTurn:\n")
	for i := range policy.MaxNotFired + 20 {
		b.WriteString("  - name: r" + strings.Repeat("x", i) + "\n    when: turn.continuation\n    set:\n      maxSteps: '3'\n")
	}
	rev := mustLoad(t, rulesDir(t, map[string]string{"turn.yaml": b.String()}), Options{})
	res, err := rev.Eval(context.Background(), policy.HookBeforeTurn, []byte(`{"turn": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	rev.Explain(context.Background(), res)
	if len(res.NotFired) != policy.MaxNotFired {
		t.Errorf("%d rules listed, want %d", len(res.NotFired), policy.MaxNotFired)
	}
}
