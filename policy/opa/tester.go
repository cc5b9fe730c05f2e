package opa

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/turngate/turngate/policy"
)

// TestResult is the outcome of one Rego test rule (test_*).
type TestResult struct {
	// Package is the test's package, e.g. "data.turngate.tool_call_test".
	Package string
	// Name is the test rule's name, e.g. "test_block_delete".
	Name     string
	Location policy.Location
	Passed   bool
	// Skipped marks a todo_test_* rule; it counts as passed.
	Skipped bool
	// Message says why a test failed: "test failed" when the rule was false
	// or undefined, else the evaluation error.
	Message string
	// Output is what print() wrote during the test.
	Output   string
	Duration time.Duration
}

// RunTests runs the test rules (test_*) of tests against modules and data,
// like `opa test`: the same Rego v1 parser, sandbox capabilities and data
// layout as Compile, builtin errors raised, and a per-test deadline of
// Options.TestTimeout. Parse, sandbox and compile problems of any file are
// returned as policy.Errors, as Compile returns them; results are sorted by
// file and line.
func RunTests(ctx context.Context, modules, tests, data []policy.File, opts Options) ([]TestResult, policy.Errors) {
	results, _, errs := runTests(ctx, modules, tests, data, opts, false)
	return results, errs
}

// RunTestsCoverage is RunTests that also measures which lines of modules
// (not of the tests) the tests evaluated, with OPA's coverage tracer as
// `opa test --coverage` does. Modules without tests are reported, wholly
// not covered.
func RunTestsCoverage(ctx context.Context, modules, tests, data []policy.File, opts Options) ([]TestResult, *Coverage, policy.Errors) {
	return runTests(ctx, modules, tests, data, opts, true)
}

// runTests runs the tests, measuring coverage when measure is set.
func runTests(ctx context.Context, modules, tests, data []policy.File, opts Options, measure bool) ([]TestResult, *Coverage, policy.Errors) {
	b := newBuild(opts)
	parsed := b.parseModules(modules, true)
	policyModules := maps.Clone(parsed)
	maps.Copy(parsed, b.parseModules(tests, false))
	doc := b.loadData(data)
	if !b.compilable() {
		return nil, nil, b.result()
	}
	store := newStore(doc)
	newRunner := func() *tester.Runner {
		return tester.NewRunner().
			SetCompiler(b.compiler(doc, parsed)).
			SetStore(store).
			SetModules(parsed).
			SetDefaultRegoVersion(ast.RegoV1).
			SetTimeout(opts.testTimeout()).
			RaiseBuiltinErrors(true).
			CapturePrintOutput(true)
	}
	runner := newRunner()
	var cov *cover.Cover
	if measure {
		cov = cover.New()
		// Only the main pass: the supplementary passes annotate why a line
		// is not covered, which the report does not show.
		runner = runner.SetCoverageQueryTracer(cov).SetCoverageRuns(nil)
	}
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		b.addCompileErrors(err)
	}
	if len(b.errs) > 0 {
		return nil, nil, b.result()
	}
	var results []TestResult
	var failed []string
	for r := range ch {
		results = append(results, testResult(r))
		if r.Fail && r.Error == nil {
			failed = append(failed, regexp.QuoteMeta(r.Package+"."+r.Name))
		}
	}
	if len(failed) > 0 {
		explainFailures(ctx, newRunner().Filter("^("+strings.Join(failed, "|")+")$"), results)
	}
	slices.SortFunc(results, func(x, y TestResult) int {
		return cmp.Or(
			strings.Compare(x.Location.File, y.Location.File),
			cmp.Compare(x.Location.Line, y.Location.Line),
			strings.Compare(x.Name, y.Name),
		)
	})
	if cov == nil {
		return results, nil, nil
	}
	return results, coverage(cov.Report(policyModules), policyModules), nil
}

// Coverage is how much of a policy's modules its tests evaluated, by
// line, as OPA counts them: a line is coverable when it holds a rule head
// or an expression, covered when a test evaluated it.
type Coverage struct {
	// Files are the modules, by file name.
	Files []FileCoverage
	// CoveredLines and CoverableLines add up the files'.
	CoveredLines, CoverableLines int
}

// FileCoverage is one module's coverage.
type FileCoverage struct {
	File                         string
	CoveredLines, CoverableLines int
	// NotCovered are the line ranges no test evaluated, in order.
	NotCovered []LineRange
}

// LineRange is the lines Start to End, both included.
type LineRange struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// coverage converts OPA's report on modules (which also lists the test
// files the tests ran in).
func coverage(rep cover.Report, modules map[string]*ast.Module) *Coverage {
	c := &Coverage{}
	for _, file := range slices.Sorted(maps.Keys(modules)) {
		fr := rep.Files[file]
		f := FileCoverage{File: file, CoveredLines: fr.CoveredLines, CoverableLines: fr.CoveredLines + fr.NotCoveredLines}
		for _, r := range fr.NotCovered {
			// OPA lists a range per expression; adjacent lines read as one.
			if n := len(f.NotCovered); n > 0 && r.Start.Row <= f.NotCovered[n-1].End+1 {
				f.NotCovered[n-1].End = max(f.NotCovered[n-1].End, r.End.Row)
				continue
			}
			f.NotCovered = append(f.NotCovered, LineRange{Start: r.Start.Row, End: r.End.Row})
		}
		c.Files = append(c.Files, f)
		c.CoveredLines += f.CoveredLines
		c.CoverableLines += f.CoverableLines
	}
	return c
}

// explainFailures runs the failed tests again with runner (filtered to
// them) tracing, and adds to each one's message the expression that failed
// and the values of its terms, as `opa test --var-values` shows them. The
// first run does not trace: tracing every test of every reload would cost
// for the passing ones too.
func explainFailures(ctx context.Context, runner *tester.Runner, results []TestResult) {
	ch, err := runner.EnableTracing(true).RunTests(ctx, nil)
	if err != nil {
		return // the first run compiled; the message stays "test failed"
	}
	why := map[string]string{}
	for r := range ch {
		if r.Fail {
			why[r.Package+"."+r.Name] = failedAt(r.Trace)
		}
	}
	for i, t := range results {
		if w := why[t.Package+"."+t.Name]; w != "" && !t.Passed {
			results[i].Message += " " + w
		}
	}
}

// failedAt renders the last expression that failed in trace, as OPA's test
// reporter finds it: "at FILE:ROW:", then the expression with
// the value of each of its terms under it.
func failedAt(trace []*topdown.Event) string {
	for _, e := range slices.Backward(trace) {
		if e.Op != topdown.FailOp || e.Location == nil || e.QueryID == 0 {
			continue
		}
		if expr, ok := e.Node.(*ast.Expr); ok {
			if _, every := expr.Terms.(*ast.Every); every {
				continue // the failing expression inside the body comes first
			}
		}
		var b strings.Builder
		if err := topdown.PrettyEvent(&b, e, topdown.PrettyEventOpts{PrettyVars: true}); err != nil {
			return ""
		}
		return fmt.Sprintf("at %s:%d:\n%s", e.Location.File, e.Location.Row, strings.TrimRight(b.String(), "\n"))
	}
	return ""
}

func testResult(r *tester.Result) TestResult {
	t := TestResult{
		Package:  r.Package,
		Name:     r.Name,
		Passed:   r.Pass() || r.Skip,
		Skipped:  r.Skip,
		Output:   string(r.Output),
		Duration: r.Duration,
	}
	if r.Location != nil {
		t.Location = policy.Location{File: r.Location.File, Line: r.Location.Row, Column: r.Location.Col}
	}
	switch {
	case r.Error != nil:
		t.Message = r.Error.Error()
	case r.Fail:
		t.Message = "test failed"
	}
	return t
}
