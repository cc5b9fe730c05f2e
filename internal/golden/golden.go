// Package golden compares tests' output with golden files, for every
// package of the module. Run a package's tests with -update to rewrite them.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/policy"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Check compares got with the file at path (relative to the package under
// test), rewriting the file instead when the tests run with -update.
func Check(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// CheckJSON compares a JSON body, indented with two spaces and ending in a
// newline, with the file at path.
func CheckJSON(t testing.TB, path string, body []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	buf.WriteByte('\n')
	Check(t, path, buf.String())
}

// Errors renders diagnostics as golden files hold them: each error with its
// location, code, rule, field, message, source line and caret, followed by
// a blank line.
func Errors(errs policy.Errors) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString(e.Error())
		b.WriteString("\n\n")
	}
	return b.String()
}
