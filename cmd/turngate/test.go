package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/turngate/turngate/policy/ruleset"
)

// testParams are the inputs of `turngate test`.
type testParams struct {
	Dir     string
	Format  string // formatPretty or formatJSON
	Verbose bool   // list passing cases too
}

// runTest is `turngate test [--format pretty|json] [-v] DIR`: run the Rego
// (*_test.rego) and CEL (*_test.yaml) tests of a rules directory in one
// report; exit 1 on any failure.
func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("test", "[--format pretty|json] [-v] DIR", stderr)
	var p testParams
	fs.StringVar(&p.Format, "format", formatPretty, "output `format`: pretty or json")
	fs.BoolVar(&p.Verbose, "v", false, "list passing tests too (pretty format)")
	dir, err := parseDir(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if !checkFormat(fs, p.Format) {
		return 2
	}
	p.Dir = dir
	return runRuleTests(ctx, p, stdout)
}

// testReport is the JSON form of a test run.
type testReport struct {
	Passed  int                  `json:"passed"`
	Failed  int                  `json:"failed"`
	Results []ruleset.TestResult `json:"results"`
}

// runRuleTests loads p.Dir, runs its tests and prints the report; it
// returns the exit code.
func runRuleTests(ctx context.Context, p testParams, stdout io.Writer) int {
	rev, errs := ruleset.Load(p.Dir, ruleset.Options{})
	if errs != nil {
		writeErrors(stdout, p.Format, errs)
		return 1
	}
	results, errs := rev.RunTests(ctx)
	if errs != nil {
		writeErrors(stdout, p.Format, errs)
		return 1
	}
	rep := testReport{Results: results}
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
	if rep.Failed > 0 {
		return 1
	}
	return 0
}

// writeTestReport prints failures (and passes with verbose), then one
// summary line per language and PASS or FAIL.
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
	if rep.Failed > 0 {
		fmt.Fprintln(w, "FAIL")
		return
	}
	fmt.Fprintln(w, "PASS")
}
