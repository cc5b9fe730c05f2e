package ruleset

import (
	"fmt"
	"testing"
)

// TestStatusReloadHistory: Status keeps the last HistorySize accepted and
// rejected reloads, newest first (unchanged ones are not kept), a rejected
// one with its positions, and the live revision's test counts.
func TestStatusReloadHistory(t *testing.T) {
	files := defaultSet()
	dir := rulesDir(t, files)
	m, err := NewManager(dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); len(st.Reloads) != 0 || st.Tests != (TestSummary{Ran: true, Passed: 1}) {
		t.Fatalf("fresh status reloads %v tests %+v: want none, 1 test passed", st.Reloads, st.Tests)
	}
	for _, tc := range []struct {
		name     string
		write    map[string]string
		accepted bool
	}{
		{"unchanged", nil, false},
		{"new file", map[string]string{"more.rego": "package turngate.tool_call\n\nblock contains \"x\" if input.tool.name == \"x\"\n"}, true},
		{"syntax error", map[string]string{"bad.rego": "package turngate.tool_call\nblock contains if {\n"}, false},
		{"failing test", map[string]string{"bad.rego": "package turngate.tool_call_test\n\nimport rego.v1\n\ntest_no if false\n"}, false},
	} {
		writeFiles(t, dir, tc.write)
		before := len(m.Status().Reloads)
		_, _ = m.Reload()
		st := m.Status()
		if tc.write == nil {
			if len(st.Reloads) != before {
				t.Errorf("%s: an unchanged reload was kept: %+v", tc.name, st.Reloads)
			}
			continue
		}
		r := st.Reloads[0]
		if r.Accepted != tc.accepted || r.Revision == "" || (tc.accepted != (len(r.Errors) == 0)) {
			t.Errorf("%s: newest reload %+v, want accepted %v", tc.name, r, tc.accepted)
		}
		if !tc.accepted && (r.Errors[0].Location.File != "bad.rego" || r.Errors[0].Location.Line == 0) {
			t.Errorf("%s: error at %s, want bad.rego:LINE", tc.name, r.Errors[0].Location)
		}
	}
	for i := range HistorySize + 5 {
		writeFiles(t, dir, map[string]string{"bad.rego": fmt.Sprintf("package turngate.tool_call\nblock contains if { # %d\n", i)})
		_, _ = m.Reload()
	}
	if st := m.Status(); len(st.Reloads) != HistorySize || st.Reloads[0].Time.Before(st.Reloads[HistorySize-1].Time) {
		t.Errorf("%d reloads kept, want the newest %d first", len(st.Reloads), HistorySize)
	}
}
