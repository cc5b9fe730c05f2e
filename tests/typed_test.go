package tests

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTypoRejectsReload is issue 11's first finding, end to end: the
// shipped rules/tools.rego of a running gateway is edited to read
// input.tool.nmae. The reload is rejected (the admin API's lastError has
// the type error at its position, with the suggestion), the last good
// revision keeps serving, and delete stays blocked in read-only mode.
func TestTypoRejectsReload(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, filepath.Join(repoRoot, "rules"), filepath.Join(dir, "rules"))
	g := startGateway(t, gatewayOptions{Dir: dir})
	var before gateStatus
	g.json(http.MethodGet, "/v1/admin/rules", nil, http.StatusOK, &before)

	file := filepath.Join(dir, "rules", "tools.rego")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	const field = `input.tool.name == "delete"`
	if !strings.Contains(string(src), field) {
		t.Fatalf("rules/tools.rego no longer reads %s", field)
	}
	typo := strings.Replace(string(src), field, `input.tool.nmae == "delete"`, 1)
	if err := os.WriteFile(file, []byte(typo), 0o644); err != nil {
		t.Fatal(err)
	}

	var st gateStatus
	poll(t, "the admin API reports the type error", func() error {
		st = gateStatus{}
		if code, err := g.getJSON("/v1/admin/rules", &st); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d: %v", code, err)
		}
		if len(st.LastError) == 0 {
			return fmt.Errorf("no lastError yet (revision %s)", st.Revision)
		}
		return nil
	})
	e := st.LastError[0]
	if len(st.LastError) != 1 || e.Code != "type_error" || filepath.Base(e.Location.File) != "tools.rego" ||
		e.Location.Line != 15 || e.Location.Column != 13 || !strings.Contains(e.Message, "did you mean input.tool.name?") {
		t.Errorf("lastError = %+v, want one type_error at tools.rego:15:13 suggesting input.tool.name", st.LastError)
	}
	if st.Revision != before.Revision {
		t.Errorf("revision = %s, want the last good %s", st.Revision, before.Revision)
	}

	s := g.chat("demo", userChat("typo-1", "u1", "delete /etc/passwd", map[string]any{"mode": "read-only"}))
	if tc, ok := s.toolCall("delete"); !ok || !strings.Contains(string(tc.Output), "delete is disabled in read-only mode") {
		t.Fatalf("delete was not blocked by the last good revision:\n%s", s)
	}
}
