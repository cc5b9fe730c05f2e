package tests

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEvalEveryAuditRecord feeds each line of a real audit log, of every
// kind, to `turngate eval --input` and to POST /v1/admin/rules/eval, as
// rules/README.md says a user may: a decision line (hash chain members and
// all) evaluates again to the outcome it records, under the same rules;
// a line of another kind is refused with a message that says it holds no
// hook input.
func TestEvalEveryAuditRecord(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, filepath.Join(repoRoot, "rules"), filepath.Join(dir, "rules"))
	g := startGateway(t, gatewayOptions{Dir: dir})
	g.chat("demo", userChat("ev-ro", "u1", "delete /etc/passwd", map[string]any{"mode": "read-only"}))
	g.chat("demo", userChat("ev-search", "u1", "search cats with no limit", nil))
	g.waitAudit("the search turn", func(rec map[string]any) bool {
		return rec["kind"] == "turn" && rec["sessionId"] == "ev-search"
	})

	var lines []string
	for line := range strings.SplitSeq(g.Stdout.String(), "\n") {
		if strings.HasPrefix(line, "{") {
			lines = append(lines, line)
		}
	}
	seen := map[string]bool{}
	for i, line := range lines {
		var rec struct {
			Kind, Hook, Outcome string
			Seq                 *int
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %d: %v\n%s", i+1, err, line)
		}
		if rec.Seq == nil {
			t.Fatalf("audit line %d has no seq; the test wants the hash chain's members:\n%s", i+1, line)
		}
		kind := rec.Kind
		if rec.Kind == "decision" {
			kind += " " + rec.Hook
		}
		seen[kind] = true
		input := filepath.Join(dir, "line.json")
		if err := os.WriteFile(input, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, code := turngateCmd(t, dir, "eval", "--input", input, "rules")
		status, body := adminEval(t, g, rec.Hook, line)
		if rec.Kind != "decision" {
			const want = "holds no hook input"
			if code != 1 || !strings.Contains(stderr, want) {
				t.Errorf("eval of a %s line: exit %d, stderr %q; want 1 and %q", kind, code, stderr, want)
			}
			if status != http.StatusBadRequest || !strings.Contains(body, want) {
				t.Errorf("admin eval of a %s line: %d %s; want 400 and %q", kind, status, body, want)
			}
			continue
		}
		var res struct{ Hook, Outcome string }
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Hook != rec.Hook || res.Outcome != rec.Outcome {
			t.Errorf("eval of a %s line: exit %d, %s%s; want exit 0 and outcome %q\nline: %s", kind, code, out, stderr, rec.Outcome, line)
		}
		if status != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil || res.Hook != rec.Hook || res.Outcome != rec.Outcome {
			t.Errorf("admin eval of a %s line: %d %s; want 200 and outcome %q", kind, status, body, rec.Outcome)
		}
	}
	kinds := slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
	t.Logf("kinds fed: %s", strings.Join(kinds, ", "))
	for _, k := range []string{"chain-start", "turn", "decision beforeTurn", "decision beforeStep", "decision beforeToolCall", "decision toolResult"} {
		if !seen[k] {
			t.Errorf("the audit log has no %s line to feed (kinds: %s)", k, strings.Join(kinds, ", "))
		}
	}
}

// turngateCmd runs the built binary with args in dir and returns its
// stdout, stderr and exit code.
func turngateCmd(t *testing.T, dir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("turngate %s: %v\n%s", strings.Join(args, " "), err, &errb)
	}
	return string(out), errb.String(), cmd.ProcessState.ExitCode()
}

// adminEval posts an audit line as the input of POST /v1/admin/rules/eval
// and returns the status and body.
func adminEval(t *testing.T, g *gateway, hook, line string) (int, string) {
	t.Helper()
	resp := g.do(http.MethodPost, "/v1/admin/rules/eval", map[string]any{"hook": hook, "input": json.RawMessage(line)})
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}
