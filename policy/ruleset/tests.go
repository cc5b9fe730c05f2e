package ruleset

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
)

// Test languages, as in TestResult.Language.
const (
	LanguageRego = "rego"
	LanguageCEL  = "cel"
)

// TestResult is one test case of a revision, Rego or CEL.
type TestResult struct {
	Language string          `json:"language"`
	Name     string          `json:"name"`
	Location policy.Location `json:"location"`
	Passed   bool            `json:"passed"`
	// Skipped marks a Rego todo_test_* rule; it counts as passed.
	Skipped bool `json:"skipped,omitempty"`
	// Message says why the case failed.
	Message string `json:"message,omitempty"`
	// Output is what Rego print() calls wrote during the test.
	Output string `json:"output,omitempty"`
}

// RunTests runs the revision's tests: the *_test.rego files with OPA's
// tester against the revision's modules and data, and the *_test.yaml
// cases against its compiled CEL rules. Results come Rego first, each
// language in file and line order. A test file that does not parse or
// compile is reported as policy.Errors (all of them, both languages).
func (r *Revision) RunTests(ctx context.Context) ([]TestResult, policy.Errors) {
	results, _, errs := r.runTests(ctx, false)
	return results, errs
}

// RunTestsCoverage is RunTests that also reports what the tests exercise:
// the Rego modules' line coverage (OPA's, every module, tested or not) and
// the CEL rules no test case fired.
func (r *Revision) RunTestsCoverage(ctx context.Context) ([]TestResult, *Coverage, policy.Errors) {
	return r.runTests(ctx, true)
}

// runTests runs the tests, measuring coverage when measure is set.
func (r *Revision) runTests(ctx context.Context, measure bool) ([]TestResult, *Coverage, policy.Errors) {
	var results []TestResult
	var regoErrs, celErrs policy.Errors
	var regoCov *opa.Coverage
	exercised := map[string]bool{}
	// With coverage, modules no test reaches are measured too.
	if tests := r.byKind[KindRegoTest]; len(tests) > 0 || (measure && len(r.byKind[KindRego]) > 0) {
		var rs []opa.TestResult
		if measure {
			rs, regoCov, regoErrs = opa.RunTestsCoverage(ctx, r.byKind[KindRego], tests, r.byKind[KindData], r.opts.OPA)
		} else {
			rs, regoErrs = opa.RunTests(ctx, r.byKind[KindRego], tests, r.byKind[KindData], r.opts.OPA)
		}
		for _, t := range rs {
			results = append(results, TestResult{
				Language: LanguageRego,
				Name:     t.Package + "." + t.Name,
				Location: t.Location,
				Passed:   t.Passed,
				Skipped:  t.Skipped,
				Message:  t.Message,
				Output:   t.Output,
			})
		}
	}
	if tests := r.byKind[KindCELTest]; len(tests) > 0 {
		var cs []celrules.TestResult
		cs, celErrs = celrules.RunTests(r.cel, tests)
		for _, t := range cs {
			results = append(results, celResult(t))
			for _, id := range t.Exercised {
				exercised[id] = true
			}
		}
	}
	if errs := mergeErrors(regoErrs, celErrs); errs != nil {
		return nil, nil, located(r.root, errs)
	}
	for i := range results {
		results[i].Location = locate(r.root, results[i].Location)
	}
	if !measure {
		return results, nil, nil
	}
	return results, r.coverage(regoCov, exercised), nil
}

// celResult adapts one CEL test case result.
func celResult(t celrules.TestResult) TestResult {
	return TestResult{
		Language: LanguageCEL,
		Name:     t.Name,
		Location: t.Location,
		Passed:   t.Passed,
		Message:  t.Message,
	}
}

// TestGate says whether a Manager runs a candidate revision's tests before
// it serves it (config: rules.requireTests).
type TestGate int

const (
	// TestsIfPresent, the default, runs the tests when the directory has
	// any (*_test.rego, *_test.yaml) and rejects a revision whose tests
	// fail or do not compile.
	TestsIfPresent TestGate = iota
	// TestsRequired does the same and also rejects a directory with no
	// tests at all.
	TestsRequired
	// TestsOff never runs the tests on load; only `turngate test` does.
	TestsOff
)

// Reasons a reload was rejected, as RejectReason returns them.
const (
	ReasonIO      = "io"      // a file could not be read
	ReasonCompile = "compile" // a rule, data or test file did not parse or compile
	ReasonTest    = "test"    // a test failed, or tests are required and there are none
)

// RejectReason classifies the error of a rejected candidate (what Reload
// returns and Options.OnReload receives) for a rejected-reloads-by-reason
// metric: ReasonTest when a test failed or tests were required but
// missing, ReasonIO when a file could not be read, else ReasonCompile.
func RejectReason(err error) string {
	var errs policy.Errors
	if !errors.As(err, &errs) {
		return ReasonCompile
	}
	reason := ReasonCompile
	for _, e := range errs {
		switch e.Code {
		case policy.CodeTestFailed, policy.CodeNoTests:
			return ReasonTest
		case policy.CodeIO:
			reason = ReasonIO
		}
	}
	return reason
}

// LiveCoverage is what the revision's tests exercise (RunTestsCoverage),
// measured the first time it is asked for and kept with the revision, so
// a reload never waits for it and an admin asking twice runs the tests
// once. It is nil when the revision has no tests. The measurement keeps
// ctx's values but not its cancellation, so a client that goes away
// does not leave the revision with a cancelled measurement; each test is
// bounded as in RunTests.
func (r *Revision) LiveCoverage(ctx context.Context) (*Coverage, policy.Errors) {
	if !r.hasTests() {
		return nil, nil
	}
	r.liveCov.once.Do(func() {
		_, r.liveCov.c, r.liveCov.errs = r.RunTestsCoverage(context.WithoutCancel(ctx))
	})
	return r.liveCov.c, r.liveCov.errs
}

// TestSummary is what a revision's tests gave when it was built: a live
// revision's tests all passed, since failing ones reject it. Coverage is
// not measured there (Revision.LiveCoverage measures it on demand,
// `turngate test --coverage` from the command line).
type TestSummary struct {
	// Ran is false when the tests were not run (Options.Tests is TestsOff,
	// or there are no test files).
	Ran    bool `json:"ran"`
	Passed int  `json:"passed"`
	Failed int  `json:"failed"`
}

// hasTests reports whether the revision holds any test file.
func (r *Revision) hasTests() bool {
	return len(r.byKind[KindRegoTest])+len(r.byKind[KindCELTest]) > 0
}

// checkTests runs the revision's tests as opts.Tests asks and returns why
// the revision must not be served: the test files' parse and compile
// errors, one CodeTestFailed error per failing test at the test's
// position, or CodeNoTests when tests are required and there are none. Each
// Rego test runs under the OPA options' TestTimeout, so a hanging test
// fails rather than stalling the reload.
func (r *Revision) checkTests(ctx context.Context) policy.Errors {
	switch {
	case r.opts.Tests == TestsOff:
		return nil
	case !r.hasTests():
		if r.opts.Tests == TestsRequired {
			return policy.Errors{{
				Code:     policy.CodeNoTests,
				Location: policy.Location{File: r.root},
				Message:  "rules.requireTests is true but the directory has no tests (*_test.rego, *_test.yaml)",
			}}
		}
		return nil
	}
	results, errs := r.RunTests(ctx)
	if errs != nil {
		return errs
	}
	r.tests.Ran = true
	var failed policy.Errors
	for _, t := range results {
		if t.Passed {
			r.tests.Passed++
			continue
		}
		r.tests.Failed++
		failed = append(failed, &policy.Error{
			Code:     policy.CodeTestFailed,
			Location: t.Location,
			Rule:     t.Name,
			Message:  testFailure(t),
			Snippet:  r.snippet(t.Location),
		})
		if len(failed) == policy.MaxErrors {
			break
		}
	}
	return failed
}

// testFailure is a failed test's message, with what it printed after its
// first line (the failing expression and its values, for a Rego test, go
// on the lines after).
func testFailure(t TestResult) string {
	msg := cmp.Or(t.Message, "test failed")
	if out := strings.TrimRight(t.Output, "\n"); out != "" {
		first, rest, multi := strings.Cut(msg, "\n")
		msg = first + " (output: " + strings.ReplaceAll(out, "\n", "; ") + ")"
		if multi {
			msg += "\n" + rest
		}
	}
	return msg
}

// snippet renders the line of a test file at loc (a located position) with
// a caret, or "" when the line is unknown.
func (r *Revision) snippet(loc policy.Location) string {
	name := filepath.Base(loc.File)
	for _, f := range slices.Concat(r.byKind[KindRegoTest], r.byKind[KindCELTest]) {
		if f.Path != name {
			continue
		}
		lines := strings.Split(string(f.Data), "\n")
		if loc.Line < 1 || loc.Line > len(lines) {
			return ""
		}
		return policy.Snippet(strings.TrimRight(lines[loc.Line-1], "\r"), loc.Column)
	}
	return ""
}
