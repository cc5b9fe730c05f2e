package main

import (
	"context"
	"fmt"
	"io"

	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/opa"
	"github.com/turngate/turngate/policy/ruleset"
)

// checkParams are the inputs of `turngate check`.
type checkParams struct {
	Dir    string
	Format string // formatPretty or formatJSON
	// Config, if set, is the gateway config the rules will serve: its
	// agents' bodySchema types input.body.
	Config string
}

// runCheck is `turngate check [--format pretty|json] [--config FILE] DIR`:
// compile and type-check a rules directory; exit 1 with every diagnostic if
// it is broken. Statically visible rule conflicts are reported as warnings.
func runCheck(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", "[--format pretty|json] [--config FILE] DIR", stderr)
	var p checkParams
	fs.StringVar(&p.Format, "format", formatPretty, "output `format`: pretty or json")
	fs.StringVar(&p.Config, "config", "", "gateway config `file` whose agents' bodySchema types input.body")
	dir, err := parseDir(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if !checkFormat(fs, p.Format) {
		return 2
	}
	p.Dir = dir
	opts, err := opaOptions(p.Config)
	if err != nil {
		fmt.Fprintf(stderr, "turngate check: %v\n", err)
		return 1
	}
	return check(p, opts, stdout)
}

// check loads p.Dir with the Rego options opts and reports the result; it
// returns the exit code. Warnings (conflict_warning) are printed but do not
// fail the check.
func check(p checkParams, opts opa.Options, stdout io.Writer) int {
	rev, errs := ruleset.Load(p.Dir, ruleset.Options{OPA: opts})
	if errs != nil {
		writeErrors(stdout, p.Format, errs)
		return 1
	}
	warns := rev.Warnings()
	if p.Format == formatJSON {
		writeJSON(stdout, append(policy.Errors{}, warns...))
		return 0
	}
	if len(warns) > 0 {
		writeDiagnostics(stdout, warns)
		fmt.Fprintf(stdout, "%d %s\n", len(warns), plural(len(warns), "warning", "warnings"))
	}
	n := len(rev.Files())
	fmt.Fprintf(stdout, "ok: %d %s, revision %s\n", n, plural(n, "file", "files"), rev.ID())
	return 0
}
