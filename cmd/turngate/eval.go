package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

// evalParams are the inputs of `turngate eval`.
type evalParams struct {
	Dir string
	// Hook is beforeTurn, beforeStep, beforeToolCall, toolResult,
	// beforePersist or onChatError; it may be empty when Input is a
	// document eval printed or an audit record.
	Hook  string
	Input string // path of a JSON or YAML hook context
	// Explain adds the rules that did not fire and why (notFired).
	Explain bool
}

// runEval is `turngate eval [--hook HOOK] [--explain] --input FILE DIR`: dry-run one
// hook decision and print the result, the rules that fired, which rule set
// each field and the input the rules saw, as JSON; with --explain also
// the rules that did not fire and why. The printed document is
// itself a valid --input. It exits 1 when the rules fail to load or the
// evaluation fails, 2 on a usage error (a misspelt --hook among them).
func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("eval", "[--hook beforeTurn|beforeStep|beforeToolCall|toolResult|beforePersist|onChatError] [--explain] --input FILE DIR", stderr)
	var p evalParams
	fs.StringVar(&p.Hook, "hook", "", "the `hook` to evaluate: beforeTurn, beforeStep, beforeToolCall, toolResult, beforePersist or onChatError (optional when the input is a document eval printed or an audit decision record)")
	fs.StringVar(&p.Input, "input", "", "`file` holding the hook's context as JSON or YAML, a document eval printed or an audit decision record")
	fs.BoolVar(&p.Explain, "explain", false, "also print notFired: the rules that did not fire, with file:line and why")
	dir, err := parseDir(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if p.Input == "" {
		fmt.Fprintln(stderr, "turngate eval: --input is required")
		fs.Usage()
		return 2
	}
	if hooks := []string{policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforeToolCall, policy.HookToolResult, policy.HookBeforePersist, policy.HookOnChatError}; p.Hook != "" && !slices.Contains(hooks, p.Hook) {
		msg := fmt.Sprintf("turngate eval: unknown --hook %q (want %s)", p.Hook, strings.Join(hooks, ", "))
		if meant := suggest.Closest(p.Hook, hooks); meant != "" {
			msg += fmt.Sprintf("; did you mean %s?", meant)
		}
		fmt.Fprintln(stderr, msg)
		fs.Usage()
		return 2
	}
	p.Dir = dir
	return evalHook(ctx, p, stdout, stderr)
}

// evalHook loads p.Dir and dry-runs p.Hook on p.Input; it returns the exit
// code. Load errors go to stdout like check's; input errors to stderr.
func evalHook(ctx context.Context, p evalParams, stdout, stderr io.Writer) int {
	input, err := os.ReadFile(p.Input)
	if err != nil {
		fmt.Fprintf(stderr, "turngate eval: reading input: %v\n", err)
		return 1
	}
	rev, errs := ruleset.Load(p.Dir, ruleset.Options{})
	if errs != nil {
		writeErrors(stdout, formatPretty, errs)
		return 1
	}
	res, err := rev.Eval(ctx, p.Hook, input)
	if err != nil {
		fmt.Fprintf(stderr, "turngate eval: %s: %v\n", p.Input, err)
		return 1
	}
	if p.Explain {
		rev.Explain(ctx, res)
	}
	writeJSON(stdout, res)
	if res.Outcome == policy.OutcomeError {
		return 1
	}
	return 0
}
