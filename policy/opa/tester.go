package opa

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"

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
	b := newBuild(opts)
	parsed := b.parseModules(modules, true)
	maps.Copy(parsed, b.parseModules(tests, false))
	doc := b.loadData(data)
	if !b.compilable() {
		return nil, b.result()
	}
	store := newStore(doc)
	runner := tester.NewRunner().
		SetCompiler(b.compiler(doc, parsed)).
		SetStore(store).
		SetModules(parsed).
		SetDefaultRegoVersion(ast.RegoV1).
		SetTimeout(opts.testTimeout()).
		RaiseBuiltinErrors(true).
		CapturePrintOutput(true)
	ch, err := runner.RunTests(ctx, nil)
	if err != nil {
		b.addCompileErrors(err)
	}
	if len(b.errs) > 0 {
		return nil, b.result()
	}
	var results []TestResult
	for r := range ch {
		results = append(results, testResult(r))
	}
	slices.SortFunc(results, func(x, y TestResult) int {
		return cmp.Or(
			strings.Compare(x.Location.File, y.Location.File),
			cmp.Compare(x.Location.Line, y.Location.Line),
			strings.Compare(x.Name, y.Name),
		)
	})
	return results, nil
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
