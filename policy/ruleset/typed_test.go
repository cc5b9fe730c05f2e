package ruleset

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// TestReloadRejectsTypos edits the shipped rules the way issue 11 found
// them slipping through: a misspelt input field or data document is a type
// error; a startup on them fails, a reload is rejected with its position
// and the last good revision keeps blocking delete in read-only mode.
func TestReloadRejectsTypos(t *testing.T) {
	shipped, err := os.ReadFile(filepath.Join("..", "..", "rules", "tools.rego"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"tools.rego": string(shipped)}
	for _, name := range []string{"limits.data.yaml", "results.rego"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "rules", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	tests := []struct {
		name, old, new string
		line, col      int
		msg            string
	}{
		{"input field", "input.tool.name == \"delete\"", "input.tool.nmae == \"delete\"", 15, 13, "did you mean input.tool.name?"},
		{"data document", "> data.limits.search", "> data.limit.search", 24, 32, "did you mean data.limits?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := rulesDir(t, files)
			m := newTestManager(t, dir, Options{})
			good := m.Current()
			if !strings.Contains(string(shipped), tt.old) {
				t.Fatalf("rules/tools.rego no longer holds %q", tt.old)
			}
			writeFiles(t, dir, map[string]string{"tools.rego": strings.Replace(string(shipped), tt.old, tt.new, 1)})
			if _, err := NewManager(dir, Options{}, quiet); err == nil {
				t.Error("a gateway started on the edited rules")
			}
			changed, err := m.Reload()
			errs, _ := errors.AsType[policy.Errors](err)
			if changed || len(errs) != 1 {
				t.Fatalf("reload = %v, %v; want rejected with one error", changed, err)
			}
			e := m.Status().LastError[0]
			if e.Code != policy.CodeType || filepath.Base(e.Location.File) != "tools.rego" || e.Location.Line != tt.line ||
				e.Location.Column != tt.col || !strings.Contains(e.Message, tt.msg) {
				t.Errorf("lastError = %v, want a type_error at tools.rego:%d:%d saying %q", e, tt.line, tt.col, tt.msg)
			}
			if m.Current() != good {
				t.Fatal("the rejected revision was swapped in")
			}
			tc := &engine.ToolCallContext{ToolName: "delete", Input: json.RawMessage(`{"path":"/etc/passwd"}`),
				Body: map[string]any{"mode": "read-only"}}
			d, _, err := m.Current().Rego().ToolCall(context.Background(), tc)
			if err != nil || d == nil || d.Action != engine.ActionBlock {
				t.Errorf("delete in read-only mode = %+v, %v; want blocked by the last good revision", d, err)
			}
		})
	}
}
