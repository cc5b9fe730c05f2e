package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
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

// Kinds of change between a recorded decision and the candidate's. A
// tool call resolves to one of the classes allow, patch, block, substitute,
// approval or error (a tool result to allow, patch or error; a CEL hook to ok or
// error); a change of class is "<old>-to-<new>". Within a class:
const (
	kindPatchChanged      = "patch-changed"      // another patched input or output
	kindSubstituteChanged = "substitute-changed" // another substituted output
	kindReasonChanged     = "reason-changed"     // other block reasons
	kindApprovalChanged   = "approval-changed"   // other approval reasons, approvers or input
	// kindOverrideChanged is a CEL override field set to another value (or
	// set by one side only), per field: "override-changed:maxSteps".
	kindOverrideChanged = "override-changed"
	// kindAny in --fail-on matches every change.
	kindAny = "any"
)

// Decision classes.
const (
	classAllow      = "allow"
	classPatch      = "patch"
	classBlock      = "block"
	classSubstitute = "substitute"
	classApproval   = "approval"
	classError      = "error"
	classOK         = "ok" // a CEL hook that evaluated (with or without overrides)
)

// failOnKinds are the kinds --fail-on accepts (besides any
// "override-changed:FIELD").
var failOnKinds = func() map[string]bool {
	m := map[string]bool{kindAny: true, kindPatchChanged: true, kindSubstituteChanged: true,
		kindReasonChanged: true, kindApprovalChanged: true, kindOverrideChanged: true}
	rego := []string{classAllow, classPatch, classBlock, classSubstitute, classApproval, classError}
	for _, a := range rego {
		for _, b := range rego {
			if a != b {
				m[a+"-to-"+b] = true
			}
		}
	}
	m[classOK+"-to-"+classError], m[classError+"-to-"+classOK] = true, true
	return m
}()

// failOnKindError says why kind is not a --fail-on kind ("" when it is):
// an unknown kind, or override-changed:FIELD with a FIELD no CEL rule can
// set, each with the closest valid name when one is close. A typo would
// otherwise switch the CI gate off without a word.
func failOnKindError(kind string) string {
	switch {
	case failOnKinds[kind]:
		return ""
	case kind == "":
		return `"" (an empty kind: a stray comma?)`
	}
	if field, ok := strings.CutPrefix(kind, kindOverrideChanged+":"); ok {
		fields := celrules.ExternalFields()
		if slices.Contains(fields, field) {
			return ""
		}
		why := fmt.Sprintf("%s (no CEL rule sets a field %q", kind, field)
		if s := suggest.Closest(field, fields); s != "" {
			return why + fmt.Sprintf("; did you mean %s:%s?)", kindOverrideChanged, s)
		}
		return why + "; the fields are " + strings.Join(fields, ", ") + ")"
	}
	if s := suggest.Closest(kind, slices.Collect(maps.Keys(failOnKinds))); s != "" {
		return fmt.Sprintf("%s (did you mean %s?)", kind, s)
	}
	return kind
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
			if why := failOnKindError(k); why != "" {
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

// replayReport is what replay prints (as JSON with --format json).
type replayReport struct {
	// Revision is the candidate rule set's.
	Revision string   `json:"revision"`
	Files    []string `json:"files"`
	// Decisions counts the decision records read; Replayed those evaluated
	// again; NotReplayable those without an input (recorded with
	// audit.recordInput off, a toolResult whose rules changed the output,
	// an input redacted whole) or whose input no longer decodes.
	Decisions     int `json:"decisions"`
	Replayed      int `json:"replayed"`
	NotReplayable int `json:"notReplayable"`
	// NotReplayableExample says why the first undecodable input was.
	NotReplayableExample string `json:"notReplayableExample,omitempty"`
	// UnrecordedState counts the not replayable decisions whose candidate
	// rules read declared state their record does not hold (never
	// guessed); UnrecordedStateExample names the first.
	UnrecordedState        int    `json:"unrecordedState"`
	UnrecordedStateExample string `json:"unrecordedStateExample,omitempty"`
	// Unchanged and Changed count the replayed decisions; a changed one
	// counts once however many kinds of change it shows.
	Unchanged int `json:"unchanged"`
	Changed   int `json:"changed"`
	// FromRevisions counts the replayed records per revision they were
	// made with.
	FromRevisions map[string]int `json:"fromRevisions"`
	// Changes are the kinds of change, by name.
	Changes []*changeKind `json:"changes"`
	// Failed lists the --fail-on kinds that occurred.
	Failed []string `json:"failed,omitempty"`
}

// changeKind is one kind of change, its count and its first examples.
type changeKind struct {
	Kind     string           `json:"kind"`
	Count    int              `json:"count"`
	Examples []*replayExample `json:"examples"`
}

// replayExample is one changed decision.
type replayExample struct {
	File       string `json:"file"`
	Line       int    `json:"line"`
	Hook       string `json:"hook"`
	SessionID  string `json:"sessionId"`
	RequestID  string `json:"requestId,omitempty"`
	StepNumber *int   `json:"stepNumber,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	Old        side   `json:"old"`
	New        side   `json:"new"`
}

// side is one decision: as recorded (Old) or as the candidate makes it
// (New).
type side struct {
	Revision   string          `json:"revision"`
	Outcome    string          `json:"outcome"`
	Decision   json.RawMessage `json:"decision,omitempty"`
	RulesFired []string        `json:"rulesFired"`
	Error      string          `json:"error,omitempty"`
}

// replay runs `turngate replay` for p and returns the exit code.
func replay(ctx context.Context, p replayParams, stdout, stderr io.Writer) int {
	rev, errs := ruleset.Load(p.Rules, ruleset.Options{})
	if errs != nil {
		writeErrors(stdout, p.Format, errs)
		return 1
	}
	rep := &replayReport{Revision: rev.ID(), Files: p.Audit, FromRevisions: map[string]int{}, Changes: []*changeKind{}}
	kinds := map[string]*changeKind{}
	for _, file := range p.Audit {
		if err := replayFile(ctx, rev, file, p.Examples, rep, kinds); err != nil {
			fmt.Fprintf(stderr, "turngate replay: %v\n", err)
			return 1
		}
	}
	for _, k := range kinds {
		rep.Changes = append(rep.Changes, k)
	}
	slices.SortFunc(rep.Changes, func(a, b *changeKind) int { return strings.Compare(a.Kind, b.Kind) })
	for _, f := range p.FailOn {
		for _, k := range rep.Changes {
			if f == kindAny || f == k.Kind || (f == kindOverrideChanged && strings.HasPrefix(k.Kind, kindOverrideChanged+":")) {
				rep.Failed = append(rep.Failed, k.Kind)
			}
		}
	}
	slices.Sort(rep.Failed)
	rep.Failed = slices.Compact(rep.Failed)
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

// replayFile replays the decision records of one audit log into rep.
func replayFile(ctx context.Context, rev *ruleset.Revision, file string, examples int, rep *replayReport, kinds map[string]*changeKind) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	r := audit.NewReader(f)
	for {
		rec, line, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", file, line, err)
		}
		rep.Decisions++
		if len(rec.Input) == 0 || rec.Input[0] != '{' {
			rep.NotReplayable++
			continue
		}
		res, err := rev.EvalRecorded(ctx, rec.Hook, rec.Input)
		if _, ok := errors.AsType[*ruleset.UnrecordedStateError](err); ok {
			rep.UnrecordedState++
			if rep.UnrecordedStateExample == "" {
				rep.UnrecordedStateExample = fmt.Sprintf("%s:%d: %v", file, line, err)
			}
		}
		if err != nil {
			rep.NotReplayable++
			if rep.NotReplayableExample == "" {
				rep.NotReplayableExample = fmt.Sprintf("%s:%d: %v", file, line, err)
			}
			continue
		}
		rep.Replayed++
		rep.FromRevisions[rec.Revision]++
		old := side{Revision: rec.Revision, Outcome: rec.Outcome, Decision: rawDecision(rec.Decision), RulesFired: nonNilStrings(rec.RulesFired), Error: rec.Error}
		cur := side{Revision: res.Revision, Outcome: res.Outcome, Decision: rawDecision(res.Result), RulesFired: res.RulesFired, Error: res.Error}
		changes := classify(rec.Hook, old, cur)
		if len(changes) == 0 {
			rep.Unchanged++
			continue
		}
		rep.Changed++
		for _, kind := range changes {
			k := kinds[kind]
			if k == nil {
				k = &changeKind{Kind: kind, Examples: []*replayExample{}}
				kinds[kind] = k
			}
			k.Count++
			if len(k.Examples) < examples {
				k.Examples = append(k.Examples, &replayExample{File: file, Line: line, Hook: rec.Hook, SessionID: rec.SessionID,
					RequestID: rec.RequestID, StepNumber: rec.StepNumber, ToolName: rec.ToolName, ToolCallID: rec.ToolCallID, Old: old, New: cur})
			}
		}
	}
}

// rawDecision is a decision as JSON, its objects' keys in order as the
// audit log records them (a patched input keeps the model's order until
// then); nil for none.
func rawDecision(d any) json.RawMessage {
	if d == nil {
		return nil
	}
	if raw, ok := d.(json.RawMessage); ok {
		return raw
	}
	b, err := json.Marshal(d)
	if err != nil || string(b) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // numbers stay as written
	var v any
	if dec.Decode(&v) != nil {
		return b
	}
	if sorted, err := json.Marshal(v); err == nil {
		return sorted
	}
	return b
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// classify returns the kinds of change from old to cur for hook; none when
// the decision is the same.
func classify(hook string, old, cur side) []string {
	oc, nc := class(hook, old), class(hook, cur)
	if hook == policy.HookBeforePersist {
		// The record's input is the message as stored, masked already:
		// the recorded rules left nothing more to mask in it. A candidate
		// that would mask more is allow-to-patch; one that would mask less
		// cannot be told from the record.
		oc = classAllow
	}
	if oc != nc {
		return []string{oc + "-to-" + nc}
	}
	switch oc {
	case classError, classAllow:
		return nil
	case classOK:
		return overrideChanges(old.Decision, cur.Decision)
	}
	var o, n engine.ToolCallDecision // a tool result's decision is {output}
	_ = json.Unmarshal(old.Decision, &o)
	_ = json.Unmarshal(cur.Decision, &n)
	switch {
	case oc == classBlock && o.Reason != n.Reason:
		return []string{kindReasonChanged}
	case oc == classSubstitute && !opa.SameJSON(old.Decision, cur.Decision):
		return []string{kindSubstituteChanged}
	case oc == classApproval && !opa.SameJSON(old.Decision, cur.Decision):
		return []string{kindApprovalChanged}
	case oc == classPatch && !opa.SameJSON(old.Decision, cur.Decision):
		return []string{kindPatchChanged}
	}
	return nil
}

// class is the class of one side's decision.
func class(hook string, s side) string {
	if s.Outcome == policy.OutcomeError {
		return classError
	}
	switch hook {
	case policy.HookBeforeTurn, policy.HookBeforeStep:
		return classOK
	case policy.HookToolResult:
		if s.Decision == nil {
			return classAllow
		}
		return classPatch
	case policy.HookBeforePersist:
		// A message stored as it is allows; one masked is patched.
		var p struct{ Masked int }
		if s.Decision == nil || json.Unmarshal(s.Decision, &p) != nil || p.Masked == 0 {
			return classAllow
		}
		return classPatch
	}
	var d engine.ToolCallDecision
	if s.Decision == nil || json.Unmarshal(s.Decision, &d) != nil {
		return classAllow
	}
	switch d.Action {
	case engine.ActionBlock:
		return classBlock
	case engine.ActionSubstitute:
		return classSubstitute
	case engine.ActionApproval:
		return classApproval
	}
	if len(d.Input) > 0 {
		return classPatch
	}
	return classAllow
}

// overrideChanges compares two CEL overrides field by field.
func overrideChanges(old, cur json.RawMessage) []string {
	var o, n map[string]json.RawMessage
	_ = json.Unmarshal(old, &o)
	_ = json.Unmarshal(cur, &n)
	var changes []string
	for f, v := range o {
		if w, ok := n[f]; !ok || !opa.SameJSON(v, w) {
			changes = append(changes, kindOverrideChanged+":"+f)
		}
	}
	for f := range n {
		if _, ok := o[f]; !ok {
			changes = append(changes, kindOverrideChanged+":"+f)
		}
	}
	slices.Sort(changes)
	return changes
}

// writeReplayReport prints rep for people.
func writeReplayReport(w io.Writer, rep *replayReport) {
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
func describe(s side) string {
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
