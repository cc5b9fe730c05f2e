package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// updateRules rewrites the rules commands' golden files:
// go test ./cmd/turngate -run TestRulesCommands -update-rules
var updateRules = flag.Bool("update-rules", false, "rewrite the rules commands' golden files")

func TestRulesCommands(t *testing.T) {
	const dir = "testdata/rules"
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		golden string // compared with stdout; empty means stdout must be empty
	}{
		{"check broken pretty", []string{"check", dir + "/broken"}, 1, "check_broken.golden"},
		{"check broken json", []string{"check", "--format", "json", dir + "/broken"}, 1, "check_broken_json.golden"},
		{"check good", []string{"check", dir + "/good"}, 0, "check_good.golden"},
		{"check good json, flag after dir", []string{"check", dir + "/good", "--format=json"}, 0, "check_good_json.golden"},
		{"check conflicts warns", []string{"check", dir + "/conflicts"}, 0, "check_conflicts.golden"},
		{"check --config warns for unknown tools", []string{"check", "--config", dir + "/unknown_tools_config.yaml", dir + "/unknown_tools"}, 0, "check_unknown_tools.golden"},
		{"check conflicts json", []string{"check", "--format", "json", dir + "/conflicts"}, 0, "check_conflicts_json.golden"},
		{"test good", []string{"test", dir + "/good"}, 0, "test_good.golden"},
		{"test good verbose", []string{"test", "-v", dir + "/good"}, 0, "test_good_verbose.golden"},
		{"test failing", []string{"test", dir + "/failing"}, 1, "test_failing.golden"},
		{"test failing json", []string{"test", "--format", "json", dir + "/failing"}, 1, "test_failing_json.golden"},
		{"test broken", []string{"test", dir + "/broken"}, 1, "check_broken.golden"},
		{"eval beforeToolCall patch", []string{"eval", "--hook", "beforeToolCall", "--input", dir + "/inputs/tool_call.yaml", dir + "/good"}, 0, "eval_tool_call.golden"},
		{"eval beforeToolCall block", []string{"eval", "--hook", "beforeToolCall", "--input", dir + "/inputs/delete.json", dir + "/good"}, 0, "eval_delete.golden"},
		{"eval beforeTurn", []string{"eval", "--hook", "beforeTurn", "--input", dir + "/inputs/turn.yaml", dir + "/good"}, 0, "eval_turn.golden"},
		{"eval beforeTurn with a shadow rule", []string{"eval", "--hook", "beforeTurn", "--input", dir + "/inputs/turn.yaml", dir + "/shadow"}, 0, "eval_turn_shadow.golden"},
		{"test shadow, coverage counts shadow rules", []string{"test", "-v", "--coverage", dir + "/shadow"}, 0, "test_shadow.golden"},
		{"test coverage", []string{"test", "--coverage", dir + "/good"}, 0, "test_coverage.golden"},
		{"test min-coverage fails", []string{"test", "--min-coverage", "90", dir + "/good"}, 1, "test_min_coverage.golden"},
		{"test min-coverage met, json", []string{"test", "--format", "json", "--min-coverage", "40", dir + "/good"}, 0, "test_coverage_json.golden"},
		{"test min-coverage not a percentage", []string{"test", "--min-coverage", "150", dir + "/good"}, 2, ""},
		{"eval beforeStep", []string{"eval", "--hook", "beforeStep", "--input", dir + "/inputs/step.yaml", dir + "/good"}, 0, "eval_step.golden"},
		{"eval toolResult", []string{"eval", "--hook", "toolResult", "--input", dir + "/inputs/tool_result.json", dir + "/good"}, 0, "eval_tool_result.golden"},
		{"eval beforeToolCall shadow block", []string{"eval", "--hook", "beforeToolCall", "--input", dir + "/inputs/delete_etc.json", dir + "/shadow"}, 0, "eval_shadow_tool_call.golden"},
		{"eval toolResult shadow redact", []string{"eval", "--hook", "toolResult", "--input", dir + "/inputs/tool_result.json", dir + "/shadow"}, 0, "eval_shadow_tool_result.golden"},
		{"eval broken rules", []string{"eval", "--hook", "beforeTurn", "--input", dir + "/inputs/turn.yaml", dir + "/broken"}, 1, "check_broken.golden"},
		{"eval misspelt input", []string{"eval", "--hook", "beforeToolCall", "--input", dir + "/inputs/misspelt.yaml", dir + "/good"}, 1, ""},
		{"eval unknown hook", []string{"eval", "--hook", "afterTurn", "--input", dir + "/inputs/turn.yaml", dir + "/good"}, 2, ""},
		{"eval missing input file", []string{"eval", "--hook", "beforeTurn", "--input", dir + "/inputs/nope.yaml", dir + "/good"}, 1, ""},
		{"eval without hook", []string{"eval", "--input", dir + "/inputs/turn.yaml", dir + "/good"}, 1, ""},
		{"eval without input", []string{"eval", "--hook", "beforeTurn", dir + "/good"}, 2, ""},
		{"check without dir", []string{"check"}, 2, ""},
		{"check two dirs", []string{"check", dir + "/good", dir + "/broken"}, 2, ""},
		{"check bad format", []string{"check", "--format", "xml", dir + "/good"}, 2, ""},
		{"check unknown flag", []string{"check", "--strict", dir + "/good"}, 2, ""},
		{"check help", []string{"check", "-h"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, &stdout, &stderr)
			}
			if tc.golden == "" {
				if stdout.Len() > 0 {
					t.Errorf("stdout = %q, want empty", &stdout)
				}
				if tc.code != 0 && stderr.Len() == 0 {
					t.Error("stderr is empty; want the reason for the failure")
				}
				return
			}
			if stderr.Len() > 0 {
				t.Errorf("stderr = %q, want empty", &stderr)
			}
			compareGolden(t, filepath.Join(dir, tc.golden), stdout.String())
		})
	}
}

// compareGolden compares got with the golden file at path, or rewrites it
// under -update-rules.
func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *updateRules {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update-rules to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update-rules to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestShippedRules is CI's `turngate check rules/ && turngate test rules/`.
func TestShippedRules(t *testing.T) {
	for _, cmd := range []string{"check", "test"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{cmd, "../../rules"}, &stdout, &stderr); code != 0 {
			t.Errorf("turngate %s ../../rules: exit %d\n%s%s", cmd, code, &stdout, &stderr)
		}
		if !strings.HasPrefix(stdout.String(), "ok: ") && !strings.HasSuffix(stdout.String(), "PASS\n") {
			t.Errorf("turngate %s ../../rules printed %q", cmd, &stdout)
		}
	}
}

// What `turngate eval` prints is itself an input: saved to a file and given
// back with --input (and no --hook), it evaluates to the same document.
func TestEvalRoundTrip(t *testing.T) {
	const dir = "testdata/rules"
	for _, tc := range []struct{ name, hook, input, rules string }{
		{"beforeToolCall patch", "beforeToolCall", dir + "/inputs/tool_call.yaml", dir + "/good"},
		{"beforeToolCall block", "beforeToolCall", dir + "/inputs/delete.json", dir + "/good"},
		{"beforeTurn", "beforeTurn", dir + "/inputs/turn.yaml", dir + "/good"},
		{"beforeStep", "beforeStep", dir + "/inputs/step.yaml", dir + "/good"},
		{"toolResult", "toolResult", dir + "/inputs/tool_result.json", dir + "/good"},
		{"shipped rules, docs input", "beforeToolCall", "../../docs/eval/delete-read-only.json", "../../rules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := mustRun(t, 0, "eval", "--hook", tc.hook, "--input", tc.input, tc.rules)
			saved := filepath.Join(t.TempDir(), "eval.json")
			if err := os.WriteFile(saved, []byte(first), 0o644); err != nil {
				t.Fatal(err)
			}
			if again := mustRun(t, 0, "eval", "--input", saved, tc.rules); again != first {
				t.Errorf("eval of the saved document differs:\n--- first\n%s\n--- again\n%s", first, again)
			}
			if again := mustRun(t, 0, "eval", "--hook", tc.hook, "--input", saved, tc.rules); again != first {
				t.Errorf("eval --hook %s of the saved document differs:\n--- first\n%s\n--- again\n%s", tc.hook, first, again)
			}
		})
	}
}

// TestEvalExplain: --explain adds the rules whose when was false, with
// their line; without it the output has no notFired.
func TestEvalExplain(t *testing.T) {
	in := filepath.Join(t.TempDir(), "turn.yaml")
	if err := os.WriteFile(in, []byte("turn: {maxSteps: 5}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, 0, "eval", "--hook", "beforeTurn", "--input", in, "testdata/rules/good"); strings.Contains(out, "notFired") {
		t.Errorf("eval without --explain printed notFired:\n%s", out)
	}
	var got struct {
		NotFired []struct {
			Rule     string
			When     string
			Value    string
			Location struct {
				File string
				Line int
			}
		}
	}
	out := mustRun(t, 0, "eval", "--explain", "--hook", "beforeTurn", "--input", in, "testdata/rules/good")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.NotFired) != 2 || got.NotFired[0].Rule != "turn.yaml#cap-max-steps" || got.NotFired[0].Location.Line != 3 ||
		got.NotFired[0].When != "turn.maxSteps > 10" || got.NotFired[0].Value != "false" || got.NotFired[1].Location.Line != 7 {
		t.Errorf("notFired %+v, want cap-max-steps (turn.yaml:3) and cheap-continuations (turn.yaml:7)\n%s", got.NotFired, out)
	}
}

// A saved document is checked like any input: its hook must match --hook
// and its members must be those eval prints.
func TestEvalSavedDocumentErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, doc, hook, want string }{
		{"hook mismatch", `{"hook": "beforeToolCall", "input": {}}`, "beforeTurn", "the input is a beforeToolCall evaluation, not beforeTurn"},
		{"unknown member", `{"hook": "beforeTurn", "input": {}, "outcmoe": "matched"}`, "", `has no member "outcmoe"`},
		{"misspelt input field", `{"hook": "beforeToolCall", "input": {"tool": {"nmae": "delete"}}}`, "", `unknown field "nmae"`},
		{"misspelt CEL input field", `{"hook": "beforeTurn", "input": {"turn": {"contiuation": true}}}`, "", `unknown field "contiuation"`},
		{"audit turn record", `{"kind": "turn", "seq": 4, "prevHash": "ab", "status": "completed"}`, "", `an audit "turn" record holds no hook input`},
		{"audit decision without input", `{"kind": "decision", "seq": 4, "prevHash": "ab", "hook": "beforeTurn", "outcome": "no_match"}`, "", "carries no input to evaluate"},
		{"audit decision, misspelt input field", `{"kind": "decision", "seq": 4, "hook": "beforeTurn", "input": {"turn": {"contiuation": true}}}`, "", `unknown field "contiuation"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".json")
			if err := os.WriteFile(path, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"eval", "--input", path, "testdata/rules/good"}
			if tc.hook != "" {
				args = append(args, "--hook", tc.hook)
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), args, &stdout, &stderr); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", &stderr, tc.want)
			}
		})
	}
}

// mustRun runs the turngate command args, expects exit code and an empty
// stderr, and returns stdout.
func mustRun(t *testing.T, code int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if got := run(context.Background(), args, &stdout, &stderr); got != code {
		t.Fatalf("turngate %s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, &stdout, &stderr)
	}
	if stderr.Len() > 0 {
		t.Fatalf("turngate %s: stderr = %q, want empty", strings.Join(args, " "), &stderr)
	}
	return stdout.String()
}

// A misspelt --hook is a usage error naming the hook meant, before any
// rule is loaded, like every other flag's.
func TestEvalMisspeltHook(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"eval", "--hook", "beforetoolcall", "--input", "testdata/rules/inputs/turn.yaml", "testdata/rules/good"}, &stdout, &stderr)
	const want = `turngate eval: unknown --hook "beforetoolcall" (want beforeTurn, beforeStep, beforeToolCall, toolResult, beforePersist, onChatError); did you mean beforeToolCall?`
	if code != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, &stderr, want)
	}
}
