package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/policy/ruleset"
)

// recordAudit loads the rules of dir with their clock stopped at now, lets
// record decide with them into an audit log writing audit.jsonl in the
// current directory, and returns the file once the log has written every
// record handed over and closed.
func recordAudit(t *testing.T, dir string, now time.Time, record func(rev *ruleset.Revision, log *audit.Log)) []byte {
	t.Helper()
	rev, errs := ruleset.Load(dir, ruleset.Options{Now: func() time.Time { return now }})
	if errs != nil {
		t.Fatal(errs)
	}
	f, err := os.Create("audit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer f.Close()
		log := audit.New(f, nil, discardLog())
		defer log.Close() // writes the records handed over, before f closes
		record(rev, log)
	}()
	recorded, err := os.ReadFile("audit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return recorded
}

// runCLI runs the turngate command args and returns its exit code, stdout
// and stderr.
func runCLI(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// replayExits runs turngate replay with args, fails the test unless it
// exits with code, and returns its stdout and stderr.
func replayExits(t *testing.T, code int, args ...string) (string, string) {
	t.Helper()
	got, stdout, stderr := runCLI(append([]string{"replay"}, args...)...)
	if got != code {
		t.Fatalf("turngate replay %s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, stdout, stderr)
	}
	return stdout, stderr
}

// recordTraffic writes the audit log of a few turns' decisions, made with
// the rules of dir, to audit.jsonl in the current directory, with a turn
// record between them, and returns it.
func recordTraffic(t *testing.T, dir string) []byte {
	t.Helper()
	return recordAudit(t, dir, time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC), func(rev *ruleset.Revision, log *audit.Log) {
		h := rev.Hooks(log, ruleset.FailClosed)
		ctx := context.Background()
		id := func(session string, roles ...string) engine.Identity {
			return engine.Identity{RequestID: "req-" + session, SessionID: session, Agent: "demo", EntryPath: engine.EntryChat,
				Principal: engine.Principal{Tenant: "acme", Subject: "ann", Roles: append([]string{"user"}, roles...)}}
		}
		call := func(session, tool, input string, body map[string]any, roles ...string) {
			tc := &engine.ToolCallContext{Identity: id(session, roles...), Type: "tool-call", ToolCallID: "call_" + tool, ToolName: tool,
				Input: json.RawMessage(input), Tool: engine.ToolInfo{Name: tool, Kind: engine.ToolKindBuiltin}, Body: body}
			_, _ = h.BeforeToolCall(ctx, tc)
		}
		readOnly := map[string]any{"mode": "read-only"}
		call("s1", "delete", `{"path": "/tmp/x"}`, readOnly)          // block → reason changed
		call("s2", "delete", `{"path": "/tmp/x"}`, nil)               // allow → block
		call("s3", "delete", `{"path": "/tmp/x"}`, readOnly, "admin") // block → allow
		call("s4", "search", `{"query": "go", "limit": 500}`, nil)    // patch 50 → patch 20
		call("s5", "search", `{"query": "go", "limit": 30}`, nil)     // allow → patch
		call("s6", "search", `{"query": "go", "limit": 5}`, readOnly) // unchanged
		log.Turn(&audit.Turn{SessionID: "s6", Status: "completed"})
		_, _ = h.BeforeTurn(ctx, &engine.TurnContext{Identity: id("s7"), MaxSteps: 50, Continuation: true}) // maxSteps 10 → 5, model fast → unset
		_, _ = h.BeforeStep(ctx, &engine.PrepareStepContext{Identity: id("s7"), StepNumber: 0})             // unchanged
		_, _ = h.ToolResult(ctx, &engine.ToolCallResultContext{Identity: id("s8"), ToolCallID: "c", ToolName: "read",
			Success: true, Output: json.RawMessage(`{"secret": "s"}`), Decision: engine.DecisionAllow}) // redacted: no input
	})
}

func abs(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// An audit log recorded with one rule set, replayed against a candidate:
// the report counts each kind of change with examples, and --fail-on turns
// the kinds that occurred into exit status 1.
func TestReplay(t *testing.T) {
	candidate, good := abs(t, "testdata/replay/candidate"), abs(t, "testdata/rules/good")
	golden := abs(t, "testdata/replay")
	t.Chdir(t.TempDir())
	recordTraffic(t, good)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"pretty", []string{"--audit", "audit.jsonl", "--rules", candidate}, 0, "replay.golden"},
		{"json, one example", []string{"--audit", "audit.jsonl", "--rules", candidate, "--format", "json", "--examples", "1"}, 0, "replay_json.golden"},
		{"fail on a change that occurs", []string{"--audit", "audit.jsonl", "--rules", candidate, "--examples", "0", "--fail-on", "block-to-allow,error-to-allow"}, 1, "replay_fail.golden"},
		{"fail on a CEL field", []string{"--rules", candidate, "--examples", "0", "--fail-on", "override-changed:maxSteps", "--audit", "audit.jsonl"}, 1, ""},
		{"fail on any CEL field", []string{"--rules", candidate, "--examples", "0", "--fail-on", "override-changed", "--audit", "audit.jsonl"}, 1, ""},
		{"no failure for changes that do not occur", []string{"--audit", "audit.jsonl", "--rules", candidate, "--examples", "0", "--fail-on", "allow-to-substitute,ok-to-error"}, 0, ""},
		{"repeated --fail-on adds up", []string{"--audit", "audit.jsonl", "--rules", candidate, "--examples", "0", "--fail-on", "block-to-allow", "--fail-on", "allow-to-substitute"}, 1, ""},
		{"same rules: nothing changes", []string{"--audit", "audit.jsonl", "--rules", good, "--fail-on", "any"}, 0, "replay_same.golden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr := replayExits(t, tc.code, tc.args...)
			if stderr != "" {
				t.Errorf("stderr = %q", stderr)
			}
			if tc.golden != "" {
				compareGolden(t, filepath.Join(golden, tc.golden), stdout)
			}
		})
	}
}

// Bad command lines and bad audit logs are clear errors, never a panic.
func TestReplayErrors(t *testing.T) {
	candidate, good := abs(t, "testdata/replay/candidate"), abs(t, "testdata/rules/good")
	t.Chdir(t.TempDir())
	recorded := recordTraffic(t, good)
	lines := strings.SplitAfter(string(recorded), "\n")
	broken := strings.Join(lines[:2], "") + `{"kind":"decision","hook":"beforeToolCall","stepNum` + "\n" + strings.Join(lines[2:], "")
	if err := os.WriteFile("broken.jsonl", []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"malformed line", []string{"--audit", "audit.jsonl", "--audit", "broken.jsonl", "--rules", candidate}, 1, "broken.jsonl:3: not an audit line"},
		{"missing file", []string{"--audit", "nope.jsonl", "--rules", candidate}, 1, "nope.jsonl"},
		{"no rules", []string{"--audit", "audit.jsonl"}, 2, "--audit and --rules are required"},
		{"misspelt kind", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", "allow-to-blok"}, 2, "unknown --fail-on kind allow-to-blok (did you mean allow-to-block?)"},
		{"misspelt CEL field", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", "allow-to-block,override-changed:maxStep"}, 2,
			`unknown --fail-on kind override-changed:maxStep (no CEL rule sets a field "maxStep"; did you mean override-changed:maxSteps?)`},
		{"unknown CEL field", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", "override-changed:colour"}, 2,
			`override-changed:colour (no CEL rule sets a field "colour"; the fields are model, system,`},
		{"empty CEL field", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", "override-changed:"}, 2, "unknown --fail-on kind override-changed:"},
		{"unknown kind", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", "everything"}, 2, "unknown --fail-on kind everything\n"},
		{"stray comma", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", ","}, 2, `unknown --fail-on kind "" (an empty kind: a stray comma?)`},
		{"trailing comma", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", "block-to-allow,"}, 2, `unknown --fail-on kind "" (an empty kind`},
		{"empty --fail-on", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", ""}, 2, `unknown --fail-on kind "" (an empty kind`},
		{"a typo in a repeated --fail-on", []string{"--audit", "audit.jsonl", "--rules", candidate, "--fail-on", "block-to-allow", "--fail-on", "allow-to-blok"}, 2, "allow-to-blok (did you mean allow-to-block?)"},
		{"bad format", []string{"--audit", "audit.jsonl", "--rules", candidate, "--format", "xml"}, 2, "unknown format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, stderr := replayExits(t, tc.code, tc.args...); !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tc.want)
			}
		})
	}
}
