package celrules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
)

// readFiles loads testdata files as policy files named by base name.
func readFiles(t testing.TB, paths ...string) []policy.File {
	t.Helper()
	var files []policy.File
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, policy.File{Path: filepath.Base(p), Data: data})
	}
	return files
}

// TestDiagnostics compiles each broken rule file in testdata/diag and
// compares every diagnostic (file:line:col, code, rule, field, message,
// source line and caret) with its golden file.
func TestDiagnostics(t *testing.T) {
	paths, err := filepath.Glob("testdata/diag/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".yaml")
		t.Run(name, func(t *testing.T) {
			set, errs := Compile(readFiles(t, p), Options{})
			if set != nil || len(errs) == 0 {
				t.Fatalf("compiled without errors")
			}
			golden.Check(t, filepath.Join("testdata", "diag", name+".golden"), golden.Errors(errs))
		})
	}
}

// TestDiagnosticsAcrossFiles checks that one load reports the errors of
// every file, in path order.
func TestDiagnosticsAcrossFiles(t *testing.T) {
	files := readFiles(t, "testdata/diag/when_not_bool.yaml", "testdata/diag/misspelt_turn_field.yaml", "testdata/diag/unknown_field.yaml")
	_, errs := Compile(files, Options{})
	var got []string
	for _, e := range errs {
		got = append(got, e.Location.String())
	}
	want := []string{"misspelt_turn_field.yaml:3:15", "unknown_field.yaml:4:7", "unknown_field.yaml:8:7", "when_not_bool.yaml:3:11"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("locations = %v, want %v", got, want)
	}
}

// TestMaxErrors checks that a badly broken load is capped.
func TestMaxErrors(t *testing.T) {
	var b strings.Builder
	b.WriteString("beforeTurn:\n")
	for i := range policy.MaxErrors + 10 {
		b.WriteString("  - name: r" + string(rune('a'+i%26)) + strings.Repeat("x", i) + "\n    set:\n      nope: '1'\n")
	}
	_, errs := Compile([]policy.File{{Path: "many.yaml", Data: []byte(b.String())}}, Options{})
	if len(errs) != policy.MaxErrors {
		t.Errorf("got %d errors, want %d", len(errs), policy.MaxErrors)
	}
}

// TestErrorFields checks the structured fields the admin API and CLI use.
func TestErrorFields(t *testing.T) {
	_, errs := Compile(readFiles(t, "testdata/diag/type_mismatch.yaml"), Options{})
	e := errs[0]
	want := policy.Error{Code: policy.CodeType, Location: policy.Location{File: "type_mismatch.yaml", Line: 4, Column: 18},
		Rule: "steps-as-string", Field: "maxSteps"}
	if e.Code != want.Code || e.Location != want.Location || e.Rule != want.Rule || e.Field != want.Field {
		t.Errorf("got %+v, want %+v", *e, want)
	}
	if !strings.Contains(e.Message, "field maxSteps must be int but expression is string") {
		t.Errorf("message = %q", e.Message)
	}
}

func TestEmptyAndHookOnlyFiles(t *testing.T) {
	set, errs := Compile([]policy.File{
		{Path: "empty.yaml", Data: nil},
		{Path: "comments.yaml", Data: []byte("# nothing yet\n")},
		{Path: "nulls.yaml", Data: []byte("beforeTurn:\nbeforeStep:\n")},
	}, Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	if set.HasBeforeTurn() || set.HasBeforeStep() {
		t.Error("empty files produced rules")
	}
}
