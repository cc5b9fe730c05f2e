package ruleset

import (
	"context"

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
	var results []TestResult
	var regoErrs, celErrs policy.Errors
	if tests := r.byKind[KindRegoTest]; len(tests) > 0 {
		var rs []opa.TestResult
		rs, regoErrs = opa.RunTests(ctx, r.byKind[KindRego], tests, r.byKind[KindData], r.opts.OPA)
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
		}
	}
	if errs := mergeErrors(regoErrs, celErrs); errs != nil {
		return nil, located(r.root, errs)
	}
	for i := range results {
		results[i].Location = locate(r.root, results[i].Location)
	}
	return results, nil
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
