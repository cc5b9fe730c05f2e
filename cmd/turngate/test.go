package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/turngate/turngate/policy/ruleset"
)

// testParams are the inputs of `turngate test`.
type testParams struct {
	Dir     string
	Format  string // formatPretty or formatJSON
	Verbose bool   // list passing cases too
	// Coverage reports Rego line coverage and the CEL rules no test fired.
	Coverage bool
	// MinCoverage fails the run when Rego or CEL coverage, each counted
	// apart, is below it (percent); it implies Coverage. Zero means none.
	MinCoverage float64
}

// runTest is `turngate test [--format pretty|json] [-v] [--coverage]
// [--min-coverage N] DIR`: run the Rego (*_test.rego) and CEL
// (*_test.yaml) tests of a rules directory in one report; exit 1 on any
// failure, or when coverage is below --min-coverage.
func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("test", "[--format pretty|json] [-v] [--coverage] [--min-coverage N] DIR", stderr)
	var p testParams
	fs.StringVar(&p.Format, "format", formatPretty, "output `format`: pretty or json")
	fs.BoolVar(&p.Verbose, "v", false, "list passing tests too (pretty format)")
	fs.BoolVar(&p.Coverage, "coverage", false, "report Rego line coverage and the CEL rules no test case fired")
	fs.Float64Var(&p.MinCoverage, "min-coverage", 0, "fail when Rego line coverage or the share of CEL rules fired is below `N` percent (implies --coverage)")
	dir, err := parseDir(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if !checkFormat(fs, p.Format) {
		return 2
	}
	if p.MinCoverage < 0 || p.MinCoverage > 100 {
		fmt.Fprintf(stderr, "turngate test: --min-coverage %v is not a percentage (want 0 to 100)\n", p.MinCoverage)
		return 2
	}
	p.Coverage = p.Coverage || p.MinCoverage > 0
	p.Dir = dir
	return runRuleTests(ctx, p, stdout)
}

// testReport is the JSON form of a test run.
type testReport struct {
	Passed  int                  `json:"passed"`
	Failed  int                  `json:"failed"`
	Results []ruleset.TestResult `json:"results"`
	// Coverage is present with --coverage; CoverageBelow says which
	// language is under --min-coverage.
	Coverage      *ruleset.Coverage `json:"coverage,omitempty"`
	CoverageBelow []string          `json:"coverageBelow,omitempty"`
}

// runRuleTests loads p.Dir, runs its tests and prints the report; it
// returns the exit code.
func runRuleTests(ctx context.Context, p testParams, stdout io.Writer) int {
	rev, errs := ruleset.Load(p.Dir, ruleset.Options{})
	if errs != nil {
		writeErrors(stdout, p.Format, errs)
		return 1
	}
	var (
		results []ruleset.TestResult
		cov     *ruleset.Coverage
	)
	if p.Coverage {
		results, cov, errs = rev.RunTestsCoverage(ctx)
	} else {
		results, errs = rev.RunTests(ctx)
	}
	if errs != nil {
		writeErrors(stdout, p.Format, errs)
		return 1
	}
	rep := testReport{Results: results, Coverage: cov}
	if cov != nil {
		rep.CoverageBelow = coverageBelow(cov, p.MinCoverage)
	}
	if rep.Results == nil {
		rep.Results = []ruleset.TestResult{}
	}
	byLang := map[string][2]int{} // language → passed, failed
	for _, r := range results {
		n := byLang[r.Language]
		if r.Passed {
			rep.Passed++
			n[0]++
		} else {
			rep.Failed++
			n[1]++
		}
		byLang[r.Language] = n
	}
	if p.Format == formatJSON {
		writeJSON(stdout, rep)
	} else {
		writeTestReport(stdout, rep, byLang, p.Verbose)
	}
	if rep.Failed > 0 || len(rep.CoverageBelow) > 0 {
		return 1
	}
	return 0
}

// coverageBelow says, for each language whose coverage is under min
// percent, by how much.
func coverageBelow(cov *ruleset.Coverage, min float64) []string {
	var out []string
	if cov.Rego.Percent < min {
		out = append(out, fmt.Sprintf("rego line coverage %.1f%% is below --min-coverage %g%%", cov.Rego.Percent, min))
	}
	if cov.CEL.Percent < min {
		out = append(out, fmt.Sprintf("cel rules fired %.1f%% is below --min-coverage %g%%", cov.CEL.Percent, min))
	}
	return out
}

// writeTestReport prints failures (and passes with verbose), one summary
// line per language, the coverage when measured, then PASS or FAIL.
func writeTestReport(w io.Writer, rep testReport, byLang map[string][2]int, verbose bool) {
	for _, r := range rep.Results {
		status := "PASS"
		switch {
		case !r.Passed:
			status = "FAIL"
		case r.Skipped:
			status = "SKIP"
		case !verbose:
			continue
		}
		fmt.Fprintf(w, "%s  %-4s  %s: %s\n", status, r.Language, r.Location, r.Name)
		if !r.Passed && r.Message != "" {
			fmt.Fprintf(w, "      %s\n", strings.ReplaceAll(r.Message, "\n", "\n      "))
		}
		if r.Output != "" && (verbose || !r.Passed) {
			fmt.Fprintf(w, "      output: %s\n", strings.ReplaceAll(strings.TrimRight(r.Output, "\n"), "\n", "\n              "))
		}
	}
	for _, lang := range []string{ruleset.LanguageRego, ruleset.LanguageCEL} {
		n := byLang[lang]
		fmt.Fprintf(w, "%-5s %d passed, %d failed\n", lang+":", n[0], n[1])
	}
	if rep.Coverage != nil {
		writeCoverage(w, rep.Coverage)
	}
	for _, below := range rep.CoverageBelow {
		fmt.Fprintf(w, "FAIL: %s\n", below)
	}
	if rep.Failed > 0 || len(rep.CoverageBelow) > 0 {
		fmt.Fprintln(w, "FAIL")
		return
	}
	fmt.Fprintln(w, "PASS")
}

// writeCoverage prints Rego line coverage per file, with the lines no test
// reached, and the CEL rules no test case fired.
func writeCoverage(w io.Writer, cov *ruleset.Coverage) {
	fmt.Fprintln(w, "coverage:")
	if cov.Rego.CoverableLines == 0 {
		fmt.Fprintln(w, "  rego  nothing to cover")
	} else {
		fmt.Fprintf(w, "  rego  %5.1f%%  %d of %d lines\n", cov.Rego.Percent, cov.Rego.CoveredLines, cov.Rego.CoverableLines)
	}
	for _, f := range cov.Rego.Files {
		fmt.Fprintf(w, "        %5.1f%%  %s (%d of %d lines)", f.Percent, f.File, f.CoveredLines, f.CoverableLines)
		if len(f.NotCovered) > 0 {
			lines := make([]string, len(f.NotCovered))
			for i, r := range f.NotCovered {
				lines[i] = strconv.Itoa(r.Start)
				if r.End != r.Start {
					lines[i] += "-" + strconv.Itoa(r.End)
				}
			}
			fmt.Fprintf(w, " not covered: %s", strings.Join(lines, ", "))
		}
		fmt.Fprintln(w)
	}
	if cov.CEL.Rules == 0 {
		fmt.Fprintln(w, "  cel   nothing to cover")
		return
	}
	fmt.Fprintf(w, "  cel   %5.1f%%  %d of %d rules fired\n", cov.CEL.Percent, cov.CEL.Fired, cov.CEL.Rules)
	for _, r := range cov.CEL.NotFired {
		shadow := ""
		if r.Shadow {
			shadow = " (shadow)"
		}
		fmt.Fprintf(w, "        not fired: %s:%d %s%s\n", r.Location.File, r.Location.Line, r.Rule[strings.IndexByte(r.Rule, '#')+1:], shadow)
	}
}
