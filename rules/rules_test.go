package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

// load loads a rules directory through ruleset and runs its tests, which
// must all pass.
func load(t *testing.T, dir string) *ruleset.Revision {
	t.Helper()
	rev, errs := ruleset.Load(dir, ruleset.Options{})
	if errs != nil {
		t.Fatalf("loading %s: %v", dir, errs)
	}
	results, errs := rev.RunTests(context.Background())
	if errs != nil {
		t.Fatalf("tests of %s: %v", dir, errs)
	}
	if len(results) == 0 {
		t.Errorf("%s has no tests", dir)
	}
	for _, r := range results {
		if !r.Passed {
			t.Errorf("%s test %s (%s) failed: %s", r.Language, r.Name, r.Location, r.Message)
		}
	}
	return rev
}

// eval dry-runs hook on rev with input (a Go value, marshalled to JSON).
func eval(t *testing.T, rev *ruleset.Revision, hook string, input any) *ruleset.EvalResult {
	t.Helper()
	data, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rev.Eval(context.Background(), hook, data)
	if err != nil {
		t.Fatalf("eval %s: %v", hook, err)
	}
	if res.Outcome == policy.OutcomeError {
		t.Fatalf("eval %s: %s", hook, res.Error)
	}
	return res
}

// result returns the JSON of a result, decoded generically.
func result(t *testing.T, res *ruleset.EvalResult) map[string]any {
	t.Helper()
	data, err := json.Marshal(res.Result)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// wantJSON fails unless got marshals to the same JSON as want.
func wantJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	g, _ := json.Marshal(got)
	var gv any
	if err := json.Unmarshal(g, &gv); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	g, _ = json.Marshal(gv) // maps marshal with sorted keys
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %s: %v", want, err)
	}
	wb, _ := json.Marshal(w)
	if string(g) != string(wb) {
		t.Errorf("%s = %s, want %s", what, g, wb)
	}
}

func TestEmbeddedMatchesDirectory(t *testing.T) {
	embedded, errs := ruleset.LoadFS(FS, "rules", ruleset.Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	if dir := load(t, "."); embedded.ID() != dir.ID() {
		t.Errorf("embedded revision %s, directory %s: FS misses a file", embedded.ID(), dir.ID())
	}
}

// TestDefaultRules checks the shipped rules' effects on the scripted
// model's demo tools (weather, search, delete), hook by hook.
func TestDefaultRules(t *testing.T) {
	rev := load(t, ".")
	call := func(tool, input string, body map[string]any) map[string]any {
		return map[string]any{"toolCallId": "c1", "toolName": tool, "input": json.RawMessage(input),
			"tool": map[string]any{"name": tool, "kind": "http"}, "body": body}
	}
	readOnly := map[string]any{"mode": "read-only"}

	t.Run("delete blocked in read-only mode", func(t *testing.T) {
		res := eval(t, rev, policy.HookBeforeToolCall, call("delete", `{"path": "/tmp/x"}`, readOnly))
		wantJSON(t, "decision", res.Result, `{"action": "block", "reason": "delete is disabled in read-only mode"}`)
	})
	t.Run("delete allowed otherwise", func(t *testing.T) {
		res := eval(t, rev, policy.HookBeforeToolCall, call("delete", `{"path": "/tmp/x"}`, nil))
		if res.Outcome != policy.OutcomeNoMatch || res.Result != nil {
			t.Errorf("outcome %s result %v, want no_match and no decision", res.Outcome, res.Result)
		}
	})
	t.Run("search limit clamped", func(t *testing.T) {
		res := eval(t, rev, policy.HookBeforeToolCall, call("search", `{"query": "go", "limit": 500}`, nil))
		wantJSON(t, "decision", res.Result, `{"action": "allow", "input": {"query": "go", "limit": 50}}`)
	})
	t.Run("demo search untouched", func(t *testing.T) {
		res := eval(t, rev, policy.HookBeforeToolCall, call("search", `{"query": "go", "limit": 5}`, readOnly))
		if res.Result != nil {
			t.Errorf("decision %v, want none", res.Result)
		}
	})
	t.Run("weather untouched", func(t *testing.T) {
		res := eval(t, rev, policy.HookBeforeToolCall, call("weather", `{"city": "Paris"}`, readOnly))
		if res.Result != nil {
			t.Errorf("decision %v, want none", res.Result)
		}
	})
	t.Run("secrets redacted from tool output", func(t *testing.T) {
		res := eval(t, rev, policy.HookToolResult, map[string]any{"toolCallId": "c1", "toolName": "search",
			"success": true, "output": map[string]any{"hits": 3, "auth": map[string]any{"Token": "t"}}})
		wantJSON(t, "decision", res.Result, `{"output": {"hits": 3, "auth": {"Token": "[REDACTED]"}}}`)
	})
	t.Run("step budget capped", func(t *testing.T) {
		res := eval(t, rev, policy.HookBeforeTurn, map[string]any{"maxSteps": 50})
		wantJSON(t, "overrides", res.Result, `{"maxSteps": 10}`)
		wantJSON(t, "setBy", res.SetBy, `{"maxSteps": "turn.yaml#cap-max-steps"}`)
	})
	t.Run("reasoning hidden on continuations", func(t *testing.T) {
		res := eval(t, rev, policy.HookBeforeTurn, map[string]any{"maxSteps": 5, "continuation": true})
		wantJSON(t, "overrides", res.Result, `{"sendReasoning": false}`)
	})
	t.Run("no beforeStep rules", func(t *testing.T) {
		res := eval(t, rev, policy.HookBeforeStep, map[string]any{"stepNumber": 0})
		if res.Outcome != policy.OutcomeNotEvaluated {
			t.Errorf("outcome %s, want not_evaluated", res.Outcome)
		}
	})
}

// Cookbook locations: the CEL and Rego packages keep one example per
// TypeScript snippet of the reference's beforeTurn, beforeStep and
// beforeToolCall sections.
const (
	celCookbook  = "../policy/celrules/testdata/cookbook"
	regoCookbook = "../policy/opa/testdata/cookbook"
)

func textMsg(role, text string) map[string]any {
	return map[string]any{"role": role, "content": []any{map[string]any{"type": "text", "text": text}}}
}

// toolExchange is an assistant tool call and its tool result.
func toolExchange(id, tool string) []any {
	return []any{
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool-call", "toolCallId": id, "toolName": tool, "input": map[string]any{}}}},
		map[string]any{"role": "tool", "content": []any{map[string]any{"type": "tool-result", "toolCallId": id, "toolName": tool, "output": "ok"}}},
	}
}

// roles lists the roles and part types of the messages in overrides.
func roles(t *testing.T, overrides map[string]any) string {
	t.Helper()
	var out []string
	msgs, _ := overrides["messages"].([]any)
	for _, m := range msgs {
		m := m.(map[string]any)
		var parts []string
		for _, p := range m["content"].([]any) {
			parts = append(parts, p.(map[string]any)["type"].(string))
		}
		out = append(out, m["role"].(string)+"("+strings.Join(parts, ",")+")")
	}
	return strings.Join(out, " ")
}

// TestCookbook loads every cookbook example through ruleset, runs its own
// tests, and checks its effect with a dry run.
func TestCookbook(t *testing.T) {
	long := make([]any, 101)
	for i := range long {
		long[i] = textMsg("user", "hi")
	}
	history := append(append(toolExchange("c1", "read_file"), toolExchange("c2", "pick_color")...),
		textMsg("user", "and now?"), textMsg("assistant", "done"))

	cel := []struct {
		dir   string
		hook  string
		input any
		check func(t *testing.T, res *ruleset.EvalResult)
	}{
		{"01-cheap-model-on-continuation", policy.HookBeforeTurn, map[string]any{"continuation": true, "model": "big"},
			func(t *testing.T, res *ruleset.EvalResult) { wantJSON(t, "overrides", res.Result, `{"model": "fast"}`) }},
		{"02-restrict-active-tools", policy.HookBeforeTurn, map[string]any{},
			func(t *testing.T, res *ruleset.EvalResult) {
				wantJSON(t, "overrides", res.Result, `{"activeTools": ["read", "write", "getWeather"]}`)
			}},
		{"03-selected-file-context", policy.HookBeforeTurn, map[string]any{"system": "Be brief.", "body": map[string]any{"selectedFile": "main.go"}},
			func(t *testing.T, res *ruleset.EvalResult) {
				wantJSON(t, "overrides", res.Result, `{"system": "Be brief.\n\nUser is editing: main.go"}`)
			}},
		{"04-short-budget-for-long-chats", policy.HookBeforeTurn, map[string]any{"messages": long, "maxSteps": 20},
			func(t *testing.T, res *ruleset.EvalResult) { wantJSON(t, "overrides", res.Result, `{"maxSteps": 3}`) }},
		{"05-stop-on-final-answer", policy.HookBeforeTurn, map[string]any{},
			func(t *testing.T, res *ruleset.EvalResult) {
				wantJSON(t, "overrides", res.Result, `{"stopWhen": [{"type": "hasToolCall", "toolName": "finalAnswer"}]}`)
			}},
		{"06-prune-tool-calls", policy.HookBeforeTurn, map[string]any{"messages": history},
			func(t *testing.T, res *ruleset.EvalResult) {
				if got := roles(t, result(t, res)); got != "user(text) assistant(text)" {
					t.Errorf("pruned messages = %s, want every tool call and result gone", got)
				}
			}},
		{"07-prune-tool-calls-per-tool", policy.HookBeforeTurn, map[string]any{"messages": history},
			func(t *testing.T, res *ruleset.EvalResult) {
				// read_file is pruned; pick_color (a client tool) survives.
				if got := roles(t, result(t, res)); got != "assistant(tool-call) tool(tool-result) user(text) assistant(text)" {
					t.Errorf("pruned messages = %s, want only read_file's call and result gone", got)
				}
			}},
		{"08-hide-reasoning-on-continuation", policy.HookBeforeTurn, map[string]any{"continuation": true},
			func(t *testing.T, res *ruleset.EvalResult) {
				wantJSON(t, "overrides", res.Result, `{"sendReasoning": false}`)
			}},
		{"09-recovery-turn", policy.HookBeforeTurn, map[string]any{"body": map[string]any{"recovering": true}},
			func(t *testing.T, res *ruleset.EvalResult) {
				wantJSON(t, "overrides", res.Result, `{"maxRetries": 0, "timeout": {"totalMs": 30000, "chunkMs": 5000}}`)
			}},
		{"10-structured-output", policy.HookBeforeTurn, map[string]any{"body": map[string]any{"mode": "structured-answer"}},
			func(t *testing.T, res *ruleset.EvalResult) {
				r := result(t, res)
				wantJSON(t, "activeTools", r["activeTools"], `[]`)
				if out, _ := r["output"].(map[string]any); out == nil || out["schema"] == nil {
					t.Errorf("output = %v, want a schema", r["output"])
				}
			}},
		{"11-force-search-first-step", policy.HookBeforeStep, map[string]any{"stepNumber": 0},
			func(t *testing.T, res *ruleset.EvalResult) {
				wantJSON(t, "overrides", res.Result, `{"activeTools": ["search"], "toolChoice": {"type": "tool", "toolName": "search"}}`)
			}},
		{"12-fast-model-after-tool-results", policy.HookBeforeStep, map[string]any{"stepNumber": 1, "steps": []any{
			map[string]any{"stepNumber": 0, "toolResults": []any{map[string]any{"toolCallId": "c1", "toolName": "search", "output": "hit"}}},
		}},
			func(t *testing.T, res *ruleset.EvalResult) {
				wantJSON(t, "overrides", res.Result, `{"model": "fast-summary"}`)
			}},
		{"13-trim-messages-on-later-steps", policy.HookBeforeStep, map[string]any{"stepNumber": 2, "messages": append(long[:10:10], textMsg("assistant", "last"))},
			func(t *testing.T, res *ruleset.EvalResult) {
				msgs, _ := result(t, res)["messages"].([]any)
				if len(msgs) != 8 || roles(t, map[string]any{"messages": msgs[7:]}) != "assistant(text)" {
					t.Errorf("trimmed to %d messages, want the last 8", len(msgs))
				}
			}},
		{"14-mask-card-numbers-before-persist", policy.HookBeforePersist, map[string]any{"message": map[string]any{
			"id": "m1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "pay with 4111 1111 1111 1234 please"}},
		}},
			func(t *testing.T, res *ruleset.EvalResult) {
				r := result(t, res)
				if r["masked"] != float64(1) || !strings.Contains(fmt.Sprint(r["redactions"]), "mask-card-numbers") {
					t.Errorf("result %v, want one string masked by mask-card-numbers", r)
				}
			}},
	}
	dirs, err := filepath.Glob(filepath.Join(celCookbook, "*"))
	if err != nil || len(dirs) != len(cel) {
		t.Fatalf("CEL cookbook has %d examples, the test covers %d (%v)", len(dirs), len(cel), err)
	}
	for _, tc := range cel {
		t.Run(tc.dir, func(t *testing.T) {
			rev := load(t, filepath.Join(celCookbook, tc.dir))
			res := eval(t, rev, tc.hook, tc.input)
			if res.Outcome != policy.OutcomeMatched {
				t.Fatalf("outcome %s, want matched", res.Outcome)
			}
			tc.check(t, res)
		})
	}

	call := func(tool string, input string, body map[string]any) map[string]any {
		return map[string]any{"toolCallId": "c1", "toolName": tool, "input": json.RawMessage(input),
			"tool": map[string]any{"name": tool, "kind": "http"}, "body": body}
	}
	rego := []struct {
		name  string
		input any
		check func(t *testing.T, res *ruleset.EvalResult)
	}{
		{"log_only", call("lookup", `{"query": "go"}`, nil), func(t *testing.T, res *ruleset.EvalResult) {
			// The decision record is the log: evaluated, nothing changed.
			if res.Outcome != policy.OutcomeNoMatch || res.Result != nil {
				t.Errorf("outcome %s result %v, want a no_match record", res.Outcome, res.Result)
			}
		}},
		{"read_only", call("delete", `{"path": "/x"}`, map[string]any{"mode": "read-only"}), func(t *testing.T, res *ruleset.EvalResult) {
			wantJSON(t, "decision", res.Result, `{"action": "block", "reason": "delete is disabled in read-only mode"}`)
		}},
		{"weather_cache", call("weather", `{"city": "Paris"}`, nil), func(t *testing.T, res *ruleset.EvalResult) {
			r := result(t, res)
			if r["action"] != engine.ActionSubstitute {
				t.Errorf("decision %v, want substitute", r)
			}
			wantJSON(t, "output", r["output"], `{"city": "Paris", "forecast": "sunny", "celsius": 24}`)
		}},
		{"clamp_limit", call("search", `{"query": "go", "limit": 500}`, nil), func(t *testing.T, res *ruleset.EvalResult) {
			wantJSON(t, "decision", res.Result, `{"action": "allow", "input": {"query": "go", "limit": 50}}`)
		}},
		{"typed_input", call("search", `{"query": " ", "limit": 5}`, nil), func(t *testing.T, res *ruleset.EvalResult) {
			wantJSON(t, "decision", res.Result, `{"action": "block", "reason": "search needs a query"}`)
		}},
		{"undefined_not", call("transfer", `{"amount": 10}`, nil), func(t *testing.T, res *ruleset.EvalResult) {
			wantJSON(t, "decision", res.Result, `{"action": "block", "reason": "transfer needs an allowed region (eu or us)"}`)
		}},
		{"sets_arrays", call("deploy", `{"targets": ["prod", "prod", "dev"]}`, nil), func(t *testing.T, res *ruleset.EvalResult) {
			wantJSON(t, "decision", res.Result, `{"action": "block", "reason": "deploy to prod needs a change ticket"}`)
		}},
		{"string_number", call("bulk_email", `{}`, map[string]any{"maxRecipients": "50"}), func(t *testing.T, res *ruleset.EvalResult) {
			wantJSON(t, "decision", res.Result, `{"action": "block", "reason": "bulk_email: at most 10 recipients"}`)
		}},
		{"url_allowlist", call("fetch", `{"url": "https://api.example.com.evil.com/"}`, nil), func(t *testing.T, res *ruleset.EvalResult) {
			wantJSON(t, "decision", res.Result, `{"action": "block", "reason": "fetch may only reach the allow-listed https hosts"}`)
		}},
	}
	policies, err := filepath.Glob(filepath.Join(regoCookbook, "*.rego"))
	if err != nil {
		t.Fatal(err)
	}
	var examples []string
	for _, p := range policies {
		if !strings.HasSuffix(p, "_test.rego") {
			examples = append(examples, strings.TrimSuffix(filepath.Base(p), ".rego"))
		}
	}
	if len(examples) != len(rego) {
		t.Fatalf("Rego cookbook has examples %v, the test covers %d", examples, len(rego))
	}
	// The Rego examples compose into one policy, as files of one rules
	// directory do; each acts on its own tool or, for search, its own
	// inputs (a blank query, a limit).
	rev := load(t, regoCookbook)
	for _, tc := range rego {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Contains(examples, tc.name) {
				t.Fatalf("no Rego cookbook example %s", tc.name)
			}
			tc.check(t, eval(t, rev, policy.HookBeforeToolCall, tc.input))
		})
	}
}
