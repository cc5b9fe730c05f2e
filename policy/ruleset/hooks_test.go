package ruleset

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// records collects decision records.
type records struct {
	mu   sync.Mutex
	list []*policy.Record
}

func (r *records) Record(x *policy.Record) {
	r.mu.Lock()
	r.list = append(r.list, x)
	r.mu.Unlock()
}

func (r *records) last(t *testing.T) *policy.Record {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.list) == 0 {
		t.Fatal("no decision record")
	}
	return r.list[len(r.list)-1]
}

var identity = engine.Identity{
	RequestID: "req-1", SessionID: "sess-1", Agent: "helper",
	Principal: engine.Principal{Tenant: "acme", Subject: "ann", Roles: []string{"dev"}},
	EntryPath: engine.EntryChat,
}

func toolCall(name, input string, body map[string]any) *engine.ToolCallContext {
	return &engine.ToolCallContext{
		Identity: identity, Type: "tool-call", ToolCallID: "call-1", ToolName: name,
		Input: json.RawMessage(input), Tool: engine.ToolInfo{Name: name, Kind: engine.ToolKindHTTP},
		StepNumber: 2, Body: body,
	}
}

func toolResult(name, output string) *engine.ToolCallResultContext {
	return &engine.ToolCallResultContext{
		Identity: identity, Type: "tool-call", ToolCallID: "call-1", ToolName: name,
		Input: json.RawMessage(`{}`), Tool: engine.ToolInfo{Name: name, Kind: engine.ToolKindHTTP},
		StepNumber: 2, Success: true, Output: json.RawMessage(output),
		Decision: engine.DecisionAllow, Executed: true,
	}
}

// callHook runs one named hook of h and returns its result and error.
func callHook(h engine.Hooks, hook string, arg any) (any, error) {
	ctx := context.Background()
	switch hook {
	case policy.HookBeforeTurn:
		return h.BeforeTurn(ctx, arg.(*engine.TurnContext))
	case policy.HookBeforeStep:
		return h.BeforeStep(ctx, arg.(*engine.PrepareStepContext))
	case policy.HookBeforeToolCall:
		return h.BeforeToolCall(ctx, arg.(*engine.ToolCallContext))
	default:
		return h.ToolResult(ctx, arg.(*engine.ToolCallResultContext))
	}
}

// TestHooksRecords: each hook's record says what ran, what fired and
// where each fired rule is defined (file:line).
func TestHooksRecords(t *testing.T) {
	// Where defaultSet's rules are defined: a CEL rule's "- name:" line, a
	// Rego rule's head.
	firedAt := map[string]string{policy.HookBeforeTurn: "10-turn.yaml:2", policy.HookBeforeStep: "20-step.yaml:2",
		policy.HookBeforeToolCall: "tools.rego:5", policy.HookToolResult: "results.rego:5"}
	full := mustLoad(t, rulesDir(t, defaultSet()), Options{})
	regoOnly := mustLoad(t, rulesDir(t, map[string]string{"tools.rego": regoToolCall}), Options{})
	celOnly := mustLoad(t, rulesDir(t, map[string]string{"turn.yaml": celTurn}), Options{})
	readOnly := map[string]any{"mode": "read-only"}

	for _, tc := range []struct {
		name      string
		rev       *Revision
		hook      string
		arg       any
		outcome   string
		fired     bool
		decision  string // substring of the JSON decision; "" means none
		step      bool
		toolField bool
	}{
		{"beforeTurn matched", full, policy.HookBeforeTurn,
			&engine.TurnContext{Identity: identity, Continuation: true}, policy.OutcomeMatched, true, `"maxSteps":3`, false, false},
		{"beforeTurn no match", full, policy.HookBeforeTurn,
			&engine.TurnContext{Identity: identity}, policy.OutcomeNoMatch, false, "", false, false},
		{"beforeTurn not evaluated", regoOnly, policy.HookBeforeTurn,
			&engine.TurnContext{Identity: identity, Continuation: true}, policy.OutcomeNotEvaluated, false, "", false, false},
		{"beforeStep matched", full, policy.HookBeforeStep,
			&engine.PrepareStepContext{Identity: identity}, policy.OutcomeMatched, true, `"activeTools":["search"]`, true, false},
		{"beforeStep not evaluated", celOnly, policy.HookBeforeStep,
			&engine.PrepareStepContext{Identity: identity}, policy.OutcomeNotEvaluated, false, "", true, false},
		{"beforeToolCall matched", full, policy.HookBeforeToolCall,
			toolCall("delete", `{"id": 1}`, readOnly), policy.OutcomeMatched, true, `"action":"block"`, true, true},
		{"beforeToolCall no match", full, policy.HookBeforeToolCall,
			toolCall("search", `{"query": "x"}`, readOnly), policy.OutcomeNoMatch, false, "", true, true},
		{"beforeToolCall not evaluated", celOnly, policy.HookBeforeToolCall,
			toolCall("delete", `{}`, readOnly), policy.OutcomeNotEvaluated, false, "", true, true},
		{"toolResult matched", full, policy.HookToolResult,
			toolResult("search", `{"secret": "s3cr3t", "hits": []}`), policy.OutcomeMatched, true, `"secret":"[REDACTED]"`, true, true},
		{"toolResult no match", full, policy.HookToolResult,
			toolResult("search", `{"hits": []}`), policy.OutcomeNoMatch, false, "", true, true},
		{"toolResult not evaluated", regoOnly, policy.HookToolResult,
			toolResult("search", `{"secret": "x"}`), policy.OutcomeNotEvaluated, false, "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec records
			res, err := callHook(tc.rev.Hooks(&rec, FailClosed), tc.hook, tc.arg)
			if err != nil {
				t.Fatalf("%s: %v", tc.hook, err)
			}
			r := rec.last(t)
			if r.Hook != tc.hook || r.Revision != tc.rev.ID() || r.Outcome != tc.outcome {
				t.Errorf("record hook/revision/outcome = %s/%s/%s, want %s/%s/%s",
					r.Hook, r.Revision, r.Outcome, tc.hook, tc.rev.ID(), tc.outcome)
			}
			if r.RequestID != "req-1" || r.SessionID != "sess-1" || r.Agent != "helper" || r.Tenant != "acme" || r.Time.IsZero() {
				t.Errorf("record identity = %+v", r)
			}
			if (r.StepNumber != nil) != tc.step {
				t.Errorf("record step number = %v, want set: %v", r.StepNumber, tc.step)
			}
			if tc.toolField && (r.ToolCallID != "call-1" || r.ToolName == "" || r.ToolKind != engine.ToolKindHTTP) {
				t.Errorf("record tool call = %q/%q kind %q", r.ToolCallID, r.ToolName, r.ToolKind)
			}
			if (len(r.RulesFired) > 0) != tc.fired {
				t.Errorf("rules fired = %v, want some: %v", r.RulesFired, tc.fired)
			}
			if want := []string{firedAt[tc.hook]}; tc.fired && !slices.Equal(r.RulesFiredAt, want) || !tc.fired && r.RulesFiredAt != nil {
				t.Errorf("rules fired %v at %q, want at %q", r.RulesFired, r.RulesFiredAt, want)
			}
			if tc.decision == "" {
				if r.Decision != nil {
					t.Errorf("decision = %s, want none", mustJSON(t, r.Decision))
				}
				return
			}
			if got := mustJSON(t, r.Decision); !strings.Contains(got, tc.decision) {
				t.Errorf("record decision = %s, want it to contain %s", got, tc.decision)
			}
			if got := mustJSON(t, res); !strings.Contains(got, tc.decision) {
				t.Errorf("hook result = %s, want it to contain %s", got, tc.decision)
			}
		})
	}

	// A Rego rule defined twice is at both definitions.
	twice := mustLoad(t, rulesDir(t, map[string]string{"tools.rego": regoToolCall + `
block contains "no deletes at night" if input.tool.name == "nuke"
`}), Options{})
	var rec records
	if _, err := twice.Hooks(&rec, FailClosed).BeforeToolCall(context.Background(), toolCall("delete", `{}`, readOnly)); err != nil {
		t.Fatal(err)
	}
	if r := rec.last(t); !slices.Equal(r.RulesFiredAt, []string{"tools.rego:5, tools.rego:10"}) {
		t.Errorf("a block defined twice fired %v at %q, want at both definitions", r.RulesFired, r.RulesFiredAt)
	}
}

func TestHooksFailurePolicy(t *testing.T) {
	rev := mustLoad(t, rulesDir(t, map[string]string{
		// A runtime error: the body has no "tier" key.
		"turn.yaml": "beforeTurn:\n  - name: by-tier\n    when: turn.body[\"tier\"] == \"gold\"\n    set:\n      maxSteps: '20'\n",
		// A conflict: two complete definitions of substitute disagree.
		"a.rego": "package turngate.tool_call\n\nimport rego.v1\n\nsubstitute := {\"output\": \"a\"} if input.tool.name == \"weather\"\n",
		"b.rego": "package turngate.tool_call\n\nimport rego.v1\n\nsubstitute := {\"output\": \"b\"} if input.tool.name == \"weather\"\n",
	}), Options{Logger: quiet})
	for _, tc := range []struct {
		name string
		hook string
		arg  any
	}{
		{"beforeTurn runtime error", policy.HookBeforeTurn, &engine.TurnContext{Identity: identity, Body: map[string]any{}}},
		{"beforeToolCall conflict", policy.HookBeforeToolCall, toolCall("weather", `{"city": "Paris"}`, nil)},
	} {
		for _, fp := range []FailurePolicy{FailClosed, FailOpen} {
			t.Run(tc.name+" "+fp.String(), func(t *testing.T) {
				var rec records
				res, err := callHook(rev.Hooks(&rec, fp), tc.hook, tc.arg)
				r := rec.last(t)
				if r.Outcome != policy.OutcomeError || r.Error == "" {
					t.Errorf("record outcome %q error %q, want an error record", r.Outcome, r.Error)
				}
				switch fp {
				case FailClosed:
					if err == nil || !strings.Contains(err.Error(), tc.hook) {
						t.Errorf("fail closed returned %v, want an error naming %s", err, tc.hook)
					}
				case FailOpen:
					if err != nil || mustJSON(t, res) != "null" {
						t.Errorf("fail open returned %s, %v; want no change and no error", mustJSON(t, res), err)
					}
				}
			})
		}
	}
}

// TestInFlightTurnKeepsRevision swaps the live revision in the middle of a
// turn: the turn's later hooks still run on the revision it started with.
func TestInFlightTurnKeepsRevision(t *testing.T) {
	dir := rulesDir(t, defaultSet())
	m := newTestManager(t, dir, Options{})
	var rec records
	turnRev := m.Current()
	turn := turnRev.Hooks(&rec, FailClosed) // a turn starts

	if _, err := turn.BeforeTurn(context.Background(), &engine.TurnContext{Identity: identity, Continuation: true}); err != nil {
		t.Fatal(err)
	}
	// An operator now blocks every search, and the gateway reloads.
	writeFiles(t, dir, map[string]string{"zz-block.rego": "package turngate.tool_call\n\nimport rego.v1\n\nblock contains \"no search\" if input.tool.name == \"search\"\n"})
	if changed, err := m.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	if m.Current() == turnRev {
		t.Fatal("reload did not swap")
	}
	d, err := turn.BeforeToolCall(context.Background(), toolCall("search", `{"query": "x"}`, nil))
	if err != nil || d != nil {
		t.Errorf("in-flight turn: search decision %s, %v; want allowed by its own revision", mustJSON(t, d), err)
	}
	for _, r := range rec.list {
		if r.Revision != turnRev.ID() {
			t.Errorf("in-flight %s record on revision %s, want %s", r.Hook, r.Revision, turnRev.ID())
		}
	}
	// A new turn sees the new rules.
	d, err = m.Current().Hooks(nil, FailClosed).BeforeToolCall(context.Background(), toolCall("search", `{"query": "x"}`, nil))
	if err != nil || d == nil || d.Action != engine.ActionBlock {
		t.Errorf("new turn: search decision %s, %v; want block", mustJSON(t, d), err)
	}
}
