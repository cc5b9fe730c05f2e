package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/sessionctx"
	"github.com/turngate/turngate/internal/suggest"
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
	var cfg *config.Config
	if p.Config != "" {
		if cfg, err = config.Load(p.Config); err != nil {
			fmt.Fprintf(stderr, "turngate check: %v\n", err)
			return 1
		}
	}
	return check(p, cfg, stdout)
}

// check loads p.Dir with the Rego options a gateway running cfg (nil: no
// config) compiles rules with and reports the result; it returns the exit
// code. Warnings (conflict_warning, and with a config
// unknown_tool_warning) are printed but do not fail the check.
func check(p checkParams, cfg *config.Config, stdout io.Writer) int {
	var opts opa.Options
	if cfg != nil {
		opts.BodySchema = cfg.BodySchema()
	}
	rev, errs := ruleset.Load(p.Dir, ruleset.Options{OPA: opts})
	if errs != nil {
		writeErrors(stdout, p.Format, errs)
		return 1
	}
	warns := rev.Warnings()
	if cfg != nil {
		warns = append(slices.Clone(warns), unknownTools(rev.ToolNames(), cfg, p.Config)...)
		slices.SortStableFunc(warns, func(a, b *policy.Error) int {
			return cmp.Or(strings.Compare(a.Location.File, b.Location.File), cmp.Compare(a.Location.Line, b.Location.Line),
				cmp.Compare(a.Location.Column, b.Location.Column))
		})
	}
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

// unknownTools warns about each tool name the rules spell out that the
// config at path does not define: no configured tool, no agent's tool (MCP
// tools are named there) and no session tool has it. A rule about such a
// tool never matches, which for a block rule silently allows. A tool the
// client declares per request is not in the config; the warning says so.
func unknownTools(names []policy.ToolName, cfg *config.Config, path string) policy.Errors {
	known := map[string]bool{sessionctx.SearchToolName: true, sessionctx.UpdateToolName: true}
	for _, t := range cfg.Tools {
		known[t.Name] = true
	}
	for _, a := range cfg.Agents {
		for _, t := range a.Tools {
			known[t] = true
		}
	}
	list := slices.Sorted(maps.Keys(known))
	var warns policy.Errors
	for _, n := range names {
		if known[n.Name] {
			continue
		}
		msg := fmt.Sprintf("tool %q is not defined in %s (no tool, agent tool or session tool has that name), so a rule about it never matches", n.Name, path)
		if meant := suggest.Closest(n.Name, list); meant != "" {
			msg += fmt.Sprintf("; did you mean %q?", meant)
		} else {
			msg += fmt.Sprintf("; the tools are %s", strings.Join(list, ", "))
		}
		msg += " (a tool the client declares in its request is not in the config)"
		warns = append(warns, &policy.Error{Code: policy.CodeUnknownToolWarning, Location: n.Location, Message: msg, Snippet: n.Snippet})
	}
	return warns
}
