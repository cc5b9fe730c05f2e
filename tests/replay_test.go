package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayRecordedTraffic records real traffic (the shipped rules, the
// demo agent over HTTP, the stdout audit sink), then replays the audit log
// against a candidate that blocks every delete: the replay reports the
// allowed delete as allow-to-block, leaves the rest unchanged, and exits 1
// with --fail-on allow-to-block.
func TestReplayRecordedTraffic(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, filepath.Join(repoRoot, "rules"), filepath.Join(dir, "rules"))
	g := startGateway(t, gatewayOptions{Dir: dir})
	if call, ok := g.chat("demo", userChat("rp-ro", "u1", "delete /etc/passwd", map[string]any{"mode": "read-only"})).toolCall("delete"); !ok ||
		string(call.Output) != `"delete is disabled in read-only mode"` {
		t.Fatalf("read-only delete: %+v", call)
	}
	if call, ok := g.chat("demo", userChat("rp-rw", "u1", "delete /tmp/x", nil)).toolCall("delete"); !ok ||
		strings.Contains(string(call.Output), "disabled") {
		t.Fatalf("delete without the mode: %+v", call)
	}
	g.chat("demo", userChat("rp-search", "u1", "search cats with no limit", nil))
	g.waitAudit("the search decision", func(rec map[string]any) bool {
		return rec["hook"] == "beforeToolCall" && rec["sessionId"] == "rp-search"
	})
	g.Stop()

	auditFile := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(auditFile, []byte(g.Stdout.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	candidate := filepath.Join(dir, "candidate")
	copyDir(t, filepath.Join(dir, "rules"), candidate)
	tools := filepath.Join(candidate, "tools.rego")
	src, err := os.ReadFile(tools)
	if err != nil {
		t.Fatal(err)
	}
	tightened := strings.Replace(string(src), `	input.body.mode == "read-only"
`, "", 1)
	if tightened == string(src) {
		t.Fatalf("rules/tools.rego no longer has the read-only condition:\n%s", src)
	}
	if err := os.WriteFile(tools, []byte(tightened), 0o644); err != nil {
		t.Fatal(err)
	}
	// The candidate's own test of the read-write delete no longer holds;
	// replay needs only the rules.
	_ = os.Remove(filepath.Join(candidate, "tools_test.rego"))

	out, code := replayCmd(t, dir, "--audit", auditFile, "--rules", candidate, "--fail-on", "allow-to-block", "--format", "json")
	if code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", code, out)
	}
	var rep struct {
		Replayed, Unchanged, Changed int
		Changes                      []struct {
			Kind     string
			Count    int
			Examples []struct {
				SessionID, ToolName string
				New                 struct{ RulesFired []string }
			}
		}
		Failed []string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("replay output is not JSON: %v\n%s", err, out)
	}
	if rep.Changed != 1 || len(rep.Changes) != 1 || rep.Changes[0].Kind != "allow-to-block" || rep.Changes[0].Count != 1 ||
		rep.Changes[0].Examples[0].SessionID != "rp-rw" || rep.Changes[0].Examples[0].ToolName != "delete" ||
		len(rep.Failed) != 1 || rep.Unchanged < 4 || rep.Replayed != rep.Unchanged+1 {
		t.Errorf("replay report = %+v\n%s", rep, out)
	}
	if fired := rep.Changes[0].Examples[0].New.RulesFired; len(fired) != 1 || !strings.Contains(fired[0], "delete is disabled") {
		t.Errorf("rules responsible = %v", fired)
	}

	// The live rules replay to the same decisions, and nothing fails.
	if out, code := replayCmd(t, dir, "--audit", auditFile, "--rules", filepath.Join(dir, "rules"), "--fail-on", "any"); code != 0 ||
		!strings.Contains(out, "changed: 0") {
		t.Errorf("replay against the recording rules: exit %d\n%s", code, out)
	}
}

// replayCmd runs `turngate replay args…` in dir and returns its stdout and
// exit code.
func replayCmd(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	out, stderr, code := turngateCmd(t, dir, append([]string{"replay"}, args...)...)
	if stderr != "" {
		t.Errorf("turngate replay stderr: %s", stderr)
	}
	return out, code
}
