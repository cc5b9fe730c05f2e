package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInit writes a starting directory and uses it as a new user would:
// its rules pass check and test, serve starts on its config and answers a
// chat, the audit file it configures verifies, and a second init refuses
// to overwrite it.
func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gw")
	out := mustRun(t, 0, "init", dir)
	if !strings.Contains(out, "turngate serve --config turngate.yaml") {
		t.Errorf("init printed %q; want the next step", out)
	}
	for _, name := range []string{"turngate.yaml", "README.md", "rules/README.md", "rules/tools.rego", "rules/turn.yaml", "rules/tools_test.rego"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("init did not write %s: %v", name, err)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "turngate.yaml"))
	if err != nil || !bytes.Contains(cfg, []byte("\n# ")) {
		t.Errorf("turngate.yaml is not a commented config: %v\n%s", err, cfg)
	}
	mustRun(t, 0, "check", filepath.Join(dir, "rules"))
	mustRun(t, 0, "test", filepath.Join(dir, "rules"))
	mustRun(t, 0, "check-config", filepath.Join(dir, "turngate.yaml"))

	r := startServe(t, filepath.Join(dir, "turngate.yaml"))
	if status, data := chatWeather(t, r.addr); status != http.StatusOK || !strings.Contains(data, `"tool-output-available"`) {
		t.Fatalf("chat on the init config: %d %s", status, data)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	if out := mustRun(t, 0, "audit", "verify", filepath.Join(dir, "data", "audit.jsonl")); !strings.HasPrefix(out, "ok: ") {
		t.Errorf("audit verify printed %q", out)
	}

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"init", dir}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "already exists") {
		t.Errorf("a second init: exit %d, stderr %q; want 1 and that a file already exists", code, &stderr)
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"init"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "want exactly one directory to write") {
		t.Errorf("init without a directory: exit %d, stderr %q; want 2 and that it wants a directory to write", code, &stderr)
	}
}
