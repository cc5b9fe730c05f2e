// Package replay re-evaluates recorded decisions against a candidate rule
// revision and reports what would change, by kind of change with examples:
// the logic behind `turngate replay` (over audit log files) and the admin
// API's POST /v1/admin/replay (over the decision store).
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/celrules"
	"github.com/turngate/turngate/policy/opa"
	"github.com/turngate/turngate/policy/ruleset"
)

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
	// set by one Side only), per field: "override-changed:maxSteps".
	kindOverrideChanged = "override-changed"
	// KindAny in --fail-on matches every change.
	KindAny = "any"
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
	m := map[string]bool{KindAny: true, kindPatchChanged: true, kindSubstituteChanged: true,
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

// FailOnKindError says why kind is not a --fail-on kind ("" when it is):
// an unknown kind, or override-changed:FIELD with a FIELD no CEL rule can
// set, each with the closest valid name when one is close. A typo would
// otherwise switch the CI gate off without a word.
func FailOnKindError(kind string) string {
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

// Report is what a replay found (`turngate replay --format json` prints
// it).
type Report struct {
	// Revision is the candidate rule set's.
	Revision string `json:"revision"`
	// Files are the audit log files read (the store: none).
	Files []string `json:"files"`
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
	Changes []*ChangeKind `json:"changes"`
	// Failed lists the --fail-on kinds that occurred.
	Failed []string `json:"failed,omitempty"`
	// Truncated says the replay stopped at its limit of Limit records
	// (POST /v1/admin/replay's limit) before the end of the range: the
	// counts are of the range's first Limit records, oldest first, and the
	// later ones were not read. `turngate replay` reads its files whole.
	Truncated bool `json:"truncated"`
	Limit     int  `json:"limit,omitempty"`
}

// ChangeKind is one kind of change, its count and its first examples.
type ChangeKind struct {
	Kind     string     `json:"kind"`
	Count    int        `json:"count"`
	Examples []*Example `json:"examples"`
}

// Example is one changed decision.
type Example struct {
	// File and Line locate a record of an audit log file, ID a record
	// of the decision store.
	File       string `json:"file,omitempty"`
	Line       int    `json:"line,omitempty"`
	ID         string `json:"id,omitempty"`
	Hook       string `json:"hook"`
	SessionID  string `json:"sessionId"`
	RequestID  string `json:"requestId,omitempty"`
	StepNumber *int   `json:"stepNumber,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
	Old        Side   `json:"old"`
	New        Side   `json:"new"`
}

// Side is one decision: as recorded (Old) or as the candidate makes it
// (New).
type Side struct {
	Revision   string          `json:"revision"`
	Outcome    string          `json:"outcome"`
	Decision   json.RawMessage `json:"decision,omitempty"`
	RulesFired []string        `json:"rulesFired"`
	Error      string          `json:"error,omitempty"`
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
func classify(hook string, old, cur Side) []string {
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

// class is the class of one Side's decision.
func class(hook string, s Side) string {
	if s.Outcome == policy.OutcomeError {
		return classError
	}
	switch hook {
	case policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookOnChatError:
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

// Where locates a recorded decision: a line of an audit log file, or a
// record of the decision store.
type Where struct {
	File string
	Line int
	// ID is the decision store's id of the record.
	ID string
}

func (w Where) String() string {
	if w.File == "" {
		return "decision " + w.ID
	}
	return fmt.Sprintf("%s:%d", w.File, w.Line)
}

// Replayer replays recorded decisions, one Add at a time, against one
// candidate revision.
type Replayer struct {
	rev      *ruleset.Revision
	examples int
	rep      *Report
	kinds    map[string]*ChangeKind
}

// New returns a Replayer against rev keeping examples examples per kind
// of change; files names the audit log files read (none for the store).
func New(rev *ruleset.Revision, examples int, files []string) *Replayer {
	if files == nil {
		files = []string{}
	}
	return &Replayer{rev: rev, examples: examples, kinds: map[string]*ChangeKind{},
		rep: &Report{Revision: rev.ID(), Files: files, FromRevisions: map[string]int{}, Changes: []*ChangeKind{}}}
}

// Add replays one recorded decision.
func (r *Replayer) Add(ctx context.Context, rec *policy.Record, at Where) {
	rep := r.rep
	rep.Decisions++
	if len(rec.Input) == 0 || rec.Input[0] != '{' {
		rep.NotReplayable++
		return
	}
	res, err := r.rev.EvalRecorded(ctx, rec.Hook, rec.Input)
	if _, ok := errors.AsType[*ruleset.UnrecordedStateError](err); ok {
		rep.UnrecordedState++
		if rep.UnrecordedStateExample == "" {
			rep.UnrecordedStateExample = fmt.Sprintf("%s: %v", at, err)
		}
	}
	if err != nil {
		rep.NotReplayable++
		if rep.NotReplayableExample == "" {
			rep.NotReplayableExample = fmt.Sprintf("%s: %v", at, err)
		}
		return
	}
	rep.Replayed++
	rep.FromRevisions[rec.Revision]++
	old := Side{Revision: rec.Revision, Outcome: rec.Outcome, Decision: rawDecision(rec.Decision), RulesFired: nonNilStrings(rec.RulesFired), Error: rec.Error}
	cur := Side{Revision: res.Revision, Outcome: res.Outcome, Decision: rawDecision(res.Result), RulesFired: res.RulesFired, Error: res.Error}
	changes := classify(rec.Hook, old, cur)
	if len(changes) == 0 {
		rep.Unchanged++
		return
	}
	rep.Changed++
	for _, kind := range changes {
		k := r.kinds[kind]
		if k == nil {
			k = &ChangeKind{Kind: kind, Examples: []*Example{}}
			r.kinds[kind] = k
		}
		k.Count++
		if len(k.Examples) < r.examples {
			k.Examples = append(k.Examples, &Example{File: at.File, Line: at.Line, ID: at.ID, Hook: rec.Hook, SessionID: rec.SessionID,
				RequestID: rec.RequestID, StepNumber: rec.StepNumber, ToolName: rec.ToolName, ToolCallID: rec.ToolCallID, Old: old, New: cur})
		}
	}
}

// Report returns what the replay found; failOn are the kinds of change
// (as FailOnKindError accepts them) whose occurrence Report.Failed lists.
func (r *Replayer) Report(failOn []string) *Report {
	rep := r.rep
	rep.Changes = rep.Changes[:0]
	for _, k := range r.kinds {
		rep.Changes = append(rep.Changes, k)
	}
	slices.SortFunc(rep.Changes, func(a, b *ChangeKind) int { return strings.Compare(a.Kind, b.Kind) })
	rep.Failed = nil
	for _, f := range failOn {
		for _, k := range rep.Changes {
			if f == KindAny || f == k.Kind || (f == kindOverrideChanged && strings.HasPrefix(k.Kind, kindOverrideChanged+":")) {
				rep.Failed = append(rep.Failed, k.Kind)
			}
		}
	}
	slices.Sort(rep.Failed)
	rep.Failed = slices.Compact(rep.Failed)
	return rep
}
