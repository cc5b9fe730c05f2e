package ruleset

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/opa"
)

// Test files for the reload gate. failingRegoTest expects the read-only
// block to fire for any tool, which the policy does not do.
const (
	passingRegoTest = `package turngate.tool_call_test

import rego.v1

test_delete_blocked if {
	count(data.turngate.tool_call.block) == 1 with input as {"tool": {"name": "delete"}, "body": {"mode": "read-only"}}
}
`
	failingRegoTest = passingRegoTest + `
test_search_blocked if {
	print("block:", data.turngate.tool_call.block) with input as {"tool": {"name": "search"}, "body": {"mode": "read-only"}}
	count(data.turngate.tool_call.block) == 1 with input as {"tool": {"name": "search"}, "body": {"mode": "read-only"}}
}
`
	failingCELTest = `cases:
  - name: continuation capped at 5
    hook: beforeTurn
    input: {turn: {continuation: true}}
    expect: {maxSteps: 5}
`
	// hangingRegoTest loops over 10^10 pairs: only its deadline ends it.
	hangingRegoTest = `package turngate.tool_call_test

import rego.v1

test_hangs if {
	count([1 | some i in numbers.range(1, 100000); some j in numbers.range(1, 100000); i == j + 100000]) == 0
}
`
)

// TestReloadGatedByTests edits the tests of a served rule set: a failing
// test is rejected like a compile error (the last good revision serves and
// lastError names the test at its position), and fixing it serves the edit.
func TestReloadGatedByTests(t *testing.T) {
	tests := []struct {
		name   string
		broken map[string]string
		golden string
	}{
		{"failing rego test", map[string]string{"tools_test.rego": failingRegoTest}, "rego.golden"},
		{"failing cel test", map[string]string{"turn_test.yaml": failingCELTest}, "cel.golden"},
		{"test file does not compile", map[string]string{"tools_test.rego": "package turngate.tool_call_test\n\ntest_x if {\n\tx == 1\n}\n"}, "compile.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := defaultSet()
			files["tools_test.rego"] = passingRegoTest
			dir := rulesDir(t, files)
			rec := newReloads()
			m := newTestManager(t, dir, Options{OnReload: rec.onReload})
			first := m.Current()

			writeFiles(t, dir, tt.broken)
			changed, err := m.Reload()
			errs, _ := errors.AsType[policy.Errors](err)
			if changed || len(errs) == 0 || m.Current() != first {
				t.Fatalf("reload with %s = %v, %v; revision swapped: %v", tt.name, changed, err, m.Current() != first)
			}
			st := m.Status()
			if st.Revision != first.ID() || st.ReloadsFailed != 1 {
				t.Errorf("status = revision %s, %d failures; want the first revision, 1 failure", st.Revision, st.ReloadsFailed)
			}
			golden.Check(t, filepath.Join("testdata", "gate", tt.golden), golden.Errors(relative(dir, st.LastError)))

			// Fixed: the edit is served.
			writeFiles(t, dir, map[string]string{"tools_test.rego": passingRegoTest + "# fixed\n"})
			for name := range tt.broken {
				if name != "tools_test.rego" {
					writeFiles(t, dir, map[string]string{name: strings.Replace(tt.broken[name], "maxSteps: 5", "maxSteps: 3", 1)})
				}
			}
			if changed, err := m.Reload(); !changed || err != nil {
				t.Fatalf("fixing reload = %v, %v", changed, err)
			}
			if m.Status().LastError != nil {
				t.Error("lastError not cleared by the fix")
			}
		})
	}
}

// relative names errs' files relative to dir, so golden files do not hold
// temporary paths.
func relative(dir string, errs policy.Errors) policy.Errors {
	for _, e := range errs {
		if rel, err := filepath.Rel(dir, e.Location.File); err == nil {
			e.Location.File = rel
		}
	}
	return errs
}

// TestTestGate covers startup under each rules.requireTests setting.
func TestTestGate(t *testing.T) {
	noTests := defaultSet()
	delete(noTests, "tools_test.rego")
	failing := defaultSet()
	failing["tools_test.rego"] = failingRegoTest
	tests := []struct {
		name  string
		files map[string]string
		gate  TestGate
		want  string // substring of the startup error; "" when it starts
	}{
		{"failing test refuses startup", failing, TestsIfPresent, "tools_test.rego:9:1: test_failed: rule \"data.turngate.tool_call_test.test_search_blocked\": test failed at tools_test.rego:11: (output: block: set())\n" +
			"\tcount(data.turngate.tool_call.block) == 1 with input as {\"tool\": {\"name\": \"search\"}, \"body\": {\"mode\": \"read-only\"}}\n" +
			"\t|     |\n\t|     set()\n\t0"},
		{"no tests is fine by default", noTests, TestsIfPresent, ""},
		{"no tests when required", noTests, TestsRequired, "tests_missing: rules.requireTests is true but the directory has no tests"},
		{"passing tests when required", defaultSet(), TestsRequired, ""},
		{"failing test with tests off", failing, TestsOff, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewManager(rulesDir(t, tt.files), Options{Tests: tt.gate}, quiet)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("NewManager: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("NewManager served %s; want an error containing %q", m.Current().ID(), tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("NewManager error:\n%v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// TestHangingTestIsRejected: a test that never ends fails at its deadline
// and the reload is rejected instead of stalling.
func TestHangingTestIsRejected(t *testing.T) {
	dir := rulesDir(t, defaultSet())
	m := newTestManager(t, dir, Options{OPA: opa.Options{TestTimeout: 50 * time.Millisecond}})
	writeFiles(t, dir, map[string]string{"tools_test.rego": hangingRegoTest})
	_, err := m.Reload()
	errs, _ := errors.AsType[policy.Errors](err)
	if len(errs) != 1 || errs[0].Code != policy.CodeTestFailed || errs[0].Rule != "data.turngate.tool_call_test.test_hangs" {
		t.Fatalf("reload error = %v; want the hanging test as test_failed", err)
	}
	if RejectReason(err) != ReasonTest {
		t.Errorf("RejectReason = %q, want %q", RejectReason(err), ReasonTest)
	}
	t.Logf("hanging test: %v", errs[0].Message)
}

// A shadow rule means the same to the tests of both languages: tests see
// it as enforced, so its tests are written as they will hold once it is
// promoted, and promoting it (deleting the mark) leaves every test's
// outcome as it was. A CEL shadow rule's tests used to see it as shadow:
// promoting it failed its own tests and the reload was rejected.
func TestShadowRulesInTests(t *testing.T) {
	const celRule = `beforeTurn:
  - name: three-steps
    shadow: true
    set: {maxSteps: '3'}
`
	const celTest = `cases:
  - name: three steps, as once promoted
    hook: beforeTurn
    input: {}
    expect: {maxSteps: 3}
`
	const regoRule = `package turngate.tool_call

# METADATA
# custom:
#   shadow: true
block contains "no deletes" if input.tool.name == "delete"
`
	const regoTest = `package turngate.tool_call_test

test_delete_blocked if {
	data.turngate.tool_call.block["no deletes"] with input as {"tool": {"name": "delete"}}
}
`
	for _, promoted := range []bool{false, true} {
		files := map[string]string{"turn.yaml": celRule, "turn_test.yaml": celTest, "tools.rego": regoRule, "tools_test.rego": regoTest}
		if promoted {
			files["turn.yaml"] = strings.Replace(celRule, "    shadow: true\n", "", 1)
			files["tools.rego"] = strings.Replace(regoRule, "# METADATA\n# custom:\n#   shadow: true\n", "", 1)
		}
		dir := rulesDir(t, files)
		if _, err := NewManager(dir, Options{Tests: TestsIfPresent}, quiet); err != nil {
			t.Errorf("promoted %v: the tests gate the rules out: %v", promoted, err)
		}
		results, errs := mustLoad(t, dir, Options{}).RunTests(context.Background())
		if errs != nil || len(results) != 2 {
			t.Fatalf("promoted %v: results %+v, errors %v", promoted, results, errs)
		}
		for _, r := range results {
			if !r.Passed {
				t.Errorf("promoted %v: %s failed: %s", promoted, r.Name, r.Message)
			}
		}
	}
}
