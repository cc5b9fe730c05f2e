package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/policy"
	replaypkg "github.com/turngate/turngate/policy/replay"
	"github.com/turngate/turngate/policy/ruleset"
)

// replayParams are the inputs of `turngate replay`.
type replayParams struct {
	// Audit are the audit log files to read, in order.
	Audit []string
	// Rules is the candidate rules directory.
	Rules string
	// Examples is how many examples to show per kind of change.
	Examples int
	// FailOn are the kinds of change that make the exit status 1.
	FailOn []string
	Format string // formatPretty or formatJSON
}

// runReplay is `turngate replay --audit FILE… --rules DIR`: re-evaluate
// every recorded decision of the audit logs that carries its input against
// the candidate rules and report what would change. Exit status 1 when the
// rules do not load, an audit line cannot be read, or a change of a
// --fail-on kind occurs; 2 on usage errors.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay", "--audit FILE [--audit FILE…] [FILE…] --rules DIR [--examples N] [--fail-on KIND,…] [--format pretty|json]", stderr)
	p := replayParams{}
	fs.Func("audit", "audit log `file` to replay (repeatable; more files may follow as arguments)", func(s string) error {
		p.Audit = append(p.Audit, s)
		return nil
	})
	fs.StringVar(&p.Rules, "rules", "", "the candidate rules `directory`")
	fs.IntVar(&p.Examples, "examples", 5, "how many examples to show per kind of change")
	var failOn []string // each --fail-on given: they add up, none replaces another
	fs.Func("fail-on", "exit 1 when a change of one of these comma-separated `kinds` occurs (repeatable): allow-to-block, block-to-allow, "+
		"patch-changed, substitute-changed, reason-changed, approval-changed, override-changed[:FIELD], ok-to-error, X-to-Y for X, Y in allow, patch, block, substitute, approval, error; or any",
		func(s string) error {
			failOn = append(failOn, s)
			return nil
		})
	fs.StringVar(&p.Format, "format", formatPretty, "output `format`: pretty or json")
	if err := parseAll(fs, args, func(arg string) { p.Audit = append(p.Audit, arg) }); err != nil {
		return usageExit(err)
	}
	var bad []string
	for _, list := range failOn {
		for k := range strings.SplitSeq(list, ",") {
			k = strings.TrimSpace(k)
			if why := replaypkg.FailOnKindError(k); why != "" {
				bad = append(bad, why)
			}
			p.FailOn = append(p.FailOn, k)
		}
	}
	switch {
	case len(p.Audit) == 0 || p.Rules == "":
		fmt.Fprintln(stderr, "turngate replay: --audit and --rules are required")
	case len(bad) > 0:
		fmt.Fprintf(stderr, "turngate replay: unknown --fail-on kind %s\n", strings.Join(bad, ", "))
	case p.Format != formatPretty && p.Format != formatJSON:
		fmt.Fprintf(stderr, "turngate replay: unknown format %q (want pretty or json)\n", p.Format)
	case p.Examples < 0:
		fmt.Fprintln(stderr, "turngate replay: --examples must be 0 or more")
	default:
		return replay(ctx, p, stdout, stderr)
	}
	fs.Usage()
	return 2
}

// parseAll parses fs's flags wherever they are in args, handing every
// other argument to positional.
func parseAll(fs *flag.FlagSet, args []string, positional func(string)) error {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return errUsage
		}
		if fs.NArg() == 0 {
			return nil
		}
		positional(fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// replay runs `turngate replay` for p and returns the exit code.
func replay(ctx context.Context, p replayParams, stdout, stderr io.Writer) int {
	rev, errs := ruleset.Load(p.Rules, ruleset.Options{})
	if errs != nil {
		writeErrors(stdout, p.Format, errs)
		return 1
	}
	r := replaypkg.New(rev, p.Examples, p.Audit)
	for _, file := range p.Audit {
		if err := replayFile(ctx, r, file); err != nil {
			fmt.Fprintf(stderr, "turngate replay: %v\n", err)
			return 1
		}
	}
	rep := r.Report(p.FailOn)
	if p.Format == formatJSON {
		writeJSON(stdout, rep)
	} else {
		writeReplayReport(stdout, rep)
	}
	if len(rep.Failed) > 0 {
		return 1
	}
	return 0
}

// replayFile replays the decision records of one audit log.
func replayFile(ctx context.Context, r *replaypkg.Replayer, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	ar := audit.NewReader(f)
	for {
		rec, line, err := ar.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", file, line, err)
		}
		r.Add(ctx, rec, replaypkg.Where{File: file, Line: line})
	}
}

// writeReplayReport prints rep for people.
func writeReplayReport(w io.Writer, rep *replaypkg.Report) {
	fmt.Fprintf(w, "replayed %d of %d decisions from %s against %s\n", rep.Replayed, rep.Decisions, strings.Join(rep.Files, ", "), rep.Revision)
	if rep.NotReplayable > 0 {
		fmt.Fprintf(w, "not replayable: %d", rep.NotReplayable)
		switch without := rep.NotReplayable - rep.UnrecordedState; {
		case without == rep.NotReplayable:
			fmt.Fprint(w, " (recorded without an input)")
		case without > 0:
			fmt.Fprintf(w, " (%d recorded without an input)", without)
		}
		if rep.NotReplayableExample != "" {
			fmt.Fprintf(w, "; e.g. %s", rep.NotReplayableExample)
		}
		fmt.Fprintln(w)
	}
	if rep.UnrecordedState > 0 {
		fmt.Fprintf(w, "of which reading state the record does not hold: %d; e.g. %s\n", rep.UnrecordedState, rep.UnrecordedStateExample)
	}
	fmt.Fprintf(w, "unchanged: %d, changed: %d\n", rep.Unchanged, rep.Changed)
	for _, k := range rep.Changes {
		fmt.Fprintf(w, "\n%s: %d\n", k.Kind, k.Count)
		for _, e := range k.Examples {
			where := e.Hook
			if e.ToolName != "" {
				where += " " + e.ToolName + " (" + e.ToolCallID + ")"
			}
			if e.StepNumber != nil {
				where += fmt.Sprintf(" step %d", *e.StepNumber)
			}
			fmt.Fprintf(w, "  %s:%d  session %s  %s\n", e.File, e.Line, e.SessionID, where)
			fmt.Fprintf(w, "    old: %s  (%s)\n", describe(e.Old), shortRevision(e.Old.Revision))
			fmt.Fprintf(w, "    new: %s\n", describe(e.New))
			if len(e.New.RulesFired) > 0 {
				fmt.Fprintf(w, "    rules: %s\n", strings.Join(e.New.RulesFired, ", "))
			}
		}
	}
	if len(rep.Failed) > 0 {
		fmt.Fprintf(w, "\nFAIL: %s\n", strings.Join(rep.Failed, ", "))
	}
}

// maxShown bounds a decision's JSON in the pretty report.
const maxShown = 160

// describe is one side's decision in a few words.
func describe(s replaypkg.Side) string {
	if s.Outcome == policy.OutcomeError {
		return "error: " + s.Error
	}
	if s.Decision == nil {
		return s.Outcome + ", no change"
	}
	d := string(s.Decision)
	if len(d) > maxShown {
		d = d[:maxShown] + "…"
	}
	return d
}

func shortRevision(rev string) string {
	if len(rev) > len("sha256:")+12 {
		return rev[:len("sha256:")+12]
	}
	return rev
}
