package ruleset

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Fixture rule files shared by the tests.
const (
	celTurn = `beforeTurn:
  - name: continuation-cap
    when: turn.continuation
    set:
      maxSteps: '3'
`
	celStep = `beforeStep:
  - name: search-first
    when: step.stepNumber == 0
    set:
      activeTools: '["search"]'
`
	regoToolCall = `package turngate.tool_call

import rego.v1

block contains "delete is disabled in read-only mode" if {
	input.tool.name == "delete"
	input.body.mode == "read-only"
}
`
	regoToolResult = `package turngate.tool_result

import rego.v1

redact contains "/secret" if input.output.secret
`
)

// writeFiles writes name → contents into dir, creating it.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rulesDir returns a fresh temporary rules directory holding files.
func rulesDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rules")
	writeFiles(t, dir, files)
	return dir
}

// mustLoad loads dir or fails the test.
func mustLoad(t testing.TB, dir string, opts Options) *Revision {
	t.Helper()
	rev, errs := Load(dir, opts)
	if errs != nil {
		t.Fatalf("Load(%s): %v", dir, errs)
	}
	return rev
}

// defaultSet is a small valid rule set of every kind.
func defaultSet() map[string]string {
	return map[string]string{
		"10-turn.yaml":    celTurn,
		"20-step.yaml":    celStep,
		"tools.rego":      regoToolCall,
		"results.rego":    regoToolResult,
		"limits.json":     `{"limits": {"search": 50}}`,
		"README.md":       "# notes, ignored\n",
		"tools_test.rego": "package turngate.tool_call_test\n\nimport rego.v1\n\ntest_ok if true\n",
	}
}

// mustJSON marshals v or fails the test.
func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
