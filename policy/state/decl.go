package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/turngate/turngate/policy"
)

// Kind is what a declaration computes over the events it counts.
type Kind string

// Declaration kinds, as the file spells their keys.
const (
	Count          Kind = "count"          // the number of events (integer)
	CountDistinct  Kind = "countDistinct"  // the number of distinct values of an input field (integer)
	Sum            Kind = "sum"            // the sum of tokens or of a numeric input field (number)
	HappenedBefore Kind = "happenedBefore" // {happened: bool, at: RFC 3339 time of the last one, "" if none}
	TimeSinceLast  Kind = "timeSinceLast"  // seconds since the last event (number); absent if none
)

// kinds lists the declaration kinds in the order errors name them.
var kinds = []Kind{Count, CountDistinct, Sum, HappenedBefore, TimeSinceLast}

// EventKind is the kind of gateway event a declaration counts.
type EventKind string

// Event kinds.
const (
	EventToolCall EventKind = "toolCall" // a tool call, counted when beforeToolCall decides it
	EventTurn     EventKind = "turn"     // a turn, counted when it is admitted
	EventTokens   EventKind = "tokens"   // a model call's token usage, counted when the provider reports it
)

// Source is what a declaration counts or sums: one of the constants or
// InputField(name).
type Source string

// Sources.
const (
	ToolCalls    Source = "toolCalls"
	Turns        Source = "turns"
	InputTokens  Source = "inputTokens"
	OutputTokens Source = "outputTokens"
)

// InputField is the source reading the named field of a tool call's input
// (a dotted path for nested objects): summed by Sum, its values counted by
// CountDistinct.
func InputField(name string) Source { return Source("input." + name) }

// Field returns the input field a source reads, or "" when it reads none.
func (s Source) Field() string {
	f, ok := strings.CutPrefix(string(s), "input.")
	if !ok {
		return ""
	}
	return f
}

// Event returns the kind of event the source counts.
func (s Source) Event() EventKind {
	switch s {
	case Turns:
		return EventTurn
	case InputTokens, OutputTokens:
		return EventTokens
	}
	return EventToolCall
}

// Outcomes a declaration may count. A tool call is recorded with its
// decision's outcome when beforeToolCall decides it (OutcomeExecuted for
// allow and rewrite) and, once it ran, its outcome becomes
// OutcomeSucceeded or OutcomeFailed, both of which count as executed. A
// call cut by a crash after its decision stays executed. A turn is
// admitted or, when a limit refuses it, refused.
const (
	OutcomeExecuted    = "executed"
	OutcomeSucceeded   = "succeeded"
	OutcomeFailed      = "failed"
	OutcomeBlocked     = "blocked"
	OutcomeSubstituted = "substituted"
	OutcomeApproval    = "approval"
	OutcomeError       = "error"
	OutcomeAdmitted    = "admitted"
	OutcomeRefused     = "refused"
)

// outcomesOf lists the outcomes each event kind has.
var outcomesOf = map[EventKind][]string{
	EventToolCall: {OutcomeExecuted, OutcomeSucceeded, OutcomeFailed, OutcomeBlocked, OutcomeSubstituted, OutcomeApproval, OutcomeError},
	EventTurn:     {OutcomeAdmitted, OutcomeRefused},
}

// ScopeKind is one part of a declaration's scope key.
type ScopeKind string

// Scope parts.
const (
	ScopeTenant    ScopeKind = "tenant"
	ScopePrincipal ScopeKind = "principal" // the tenant and the subject
	ScopeAgent     ScopeKind = "agent"
	ScopeSession   ScopeKind = "session" // the tenant and the session id
	ScopeTool      ScopeKind = "tool"
	ScopeInput     ScopeKind = "input" // a field of the tool input (Field)
)

// ScopePart is one part of a scope key.
type ScopePart struct {
	Kind ScopeKind
	// Field is the input field of ScopeInput (a dotted path).
	Field string
}

// String renders the part as the file spells it.
func (p ScopePart) String() string {
	if p.Kind == ScopeInput {
		return "input." + p.Field
	}
	return string(p.Kind)
}

// Calendar is a calendar window's period.
type Calendar string

// Calendar periods.
const (
	Hour  Calendar = "hour"
	Day   Calendar = "day"
	Month Calendar = "month"
)

// Window is a declaration's window: sliding (Within, Resolution) or
// calendar (Calendar, Location).
type Window struct {
	// Within is a sliding window's length.
	Within time.Duration
	// Resolution is the step in which a sliding window's start moves: the
	// window at time t holds the events at or after t-Within rounded down
	// to a multiple of Resolution. Zero means DefaultResolution(Within).
	Resolution time.Duration
	// Calendar is a calendar window's period: the window holds the
	// events since the period (in Location) began.
	Calendar Calendar
	// Location is a calendar window's time zone; nil means UTC.
	Location *time.Location
}

// DefaultResolution is the resolution of a sliding window that states
// none: a sixtieth of its length, at least a second.
func DefaultResolution(within time.Duration) time.Duration {
	return max(time.Second, (within / 60).Truncate(time.Second))
}

func (w Window) resolution() time.Duration {
	if w.Resolution > 0 {
		return w.Resolution
	}
	return DefaultResolution(w.Within)
}

func (w Window) location() *time.Location {
	if w.Location == nil {
		return time.UTC
	}
	return w.Location
}

// Start returns the earliest event time inside the window at now.
func (w Window) Start(now time.Time) time.Time {
	if w.Calendar == "" {
		res := w.resolution()
		return time.UnixMilli(now.Add(-w.Within).UnixMilli() / res.Milliseconds() * res.Milliseconds())
	}
	t := now.In(w.location())
	switch w.Calendar {
	case Hour:
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, t.Location())
	case Day:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
	}
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, t.Location())
}

// calendarBucket is a calendar window's bucket: a minute, a divisor of
// every time zone's offset, so every period starts on a bucket.
const calendarBucket = time.Minute

// Bucket returns the start of the bucket that counts an event at t: the
// window's resolution for a sliding window, a minute for a calendar one.
// Every window starts on a bucket boundary, so a window is a range of
// buckets.
func (w Window) Bucket(t time.Time) time.Time {
	step := calendarBucket
	if w.Calendar == "" {
		step = w.resolution()
	}
	ms := step.Milliseconds()
	return time.UnixMilli(t.UnixMilli() / ms * ms)
}

// Reset returns when an event at now stops counting at the latest: the
// next period's start for a calendar window, Within plus a Resolution
// later for a sliding one. A Retry-After of Reset(now)-now is safe.
func (w Window) Reset(now time.Time) time.Time {
	if w.Calendar == "" {
		return now.Add(w.Within + w.resolution())
	}
	s := w.Start(now)
	switch w.Calendar {
	case Hour:
		return s.Add(time.Hour)
	case Day:
		return s.AddDate(0, 0, 1)
	}
	return s.AddDate(0, 1, 0)
}

// String renders the window as the file spells it.
func (w Window) String() string {
	if w.Calendar == "" {
		return fmt.Sprintf("within %v resolution %v", w.Within, w.resolution())
	}
	return fmt.Sprintf("calendar %s %s", w.Calendar, w.location())
}

// Decl is one declared state.
type Decl struct {
	// Name is how rules read it: input.state.NAME, state.NAME.
	Name string
	Kind Kind
	// Of is what it counts or sums.
	Of Source
	// Tools restricts tool-call events to these tools; empty means all.
	Tools []string
	// Outcomes restricts the events counted to these outcomes (executed
	// includes succeeded and failed); empty means every outcome.
	Outcomes []string
	// Scope is the scope key; empty means one value for the whole gateway.
	Scope  []ScopePart
	Window Window
	// Location is where the file declares it (zero for declarations from
	// the config).
	Location policy.Location
}

// Fingerprint identifies the rows that count the declaration: a hash of
// its name, what it counts and its scope. Changing any of them starts the
// state from zero; changing only the window keeps its events.
func (d *Decl) Fingerprint() string {
	var b strings.Builder
	// The tools as a set: listing them in another order counts the same.
	tools := slices.Sorted(slices.Values(d.Tools))
	fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%s\x00", d.Name, d.Kind, d.Of, strings.Join(slices.Compact(tools), ","))
	for _, p := range d.Scope {
		b.WriteString(p.String())
		b.WriteByte(',')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// Counts reports whether the declaration counts events of kind ev for the
// tool called tool ("" for events other than tool calls).
func (d *Decl) Counts(ev EventKind, tool string) bool {
	switch d.Of.Event() {
	case EventTokens:
		return ev == EventTokens
	case EventToolCall:
		return ev == EventToolCall && (len(d.Tools) == 0 || slices.Contains(d.Tools, tool))
	}
	return d.Of.Event() == ev
}

// MatchOutcomes returns the stored outcomes the declaration counts, nil
// for every outcome: executed stands for itself, succeeded and failed.
func (d *Decl) MatchOutcomes() []string {
	if len(d.Outcomes) == 0 {
		return nil
	}
	var out []string
	for _, o := range d.Outcomes {
		out = append(out, o)
		if o == OutcomeExecuted {
			out = append(out, OutcomeSucceeded, OutcomeFailed)
		}
	}
	return out
}

// Expiry returns when an event at t stops counting for the declaration
// whatever the time: the store prunes it after that.
func (d *Decl) Expiry(t time.Time) time.Time { return d.Window.Reset(t) }

var namePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
var fieldPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z_][A-Za-z0-9_-]*)*$`)

// check returns what is wrong with d, or "" when it is sound. at names the
// key to point at (by its file spelling) for each problem.
func (d *Decl) check() []problem {
	var ps []problem
	add := func(key, format string, args ...any) { ps = append(ps, problem{key, fmt.Sprintf(format, args...)}) }
	if !namePattern.MatchString(d.Name) {
		add("name", "state name %q must be lower case letters, digits and _ (starting with a letter or _)", d.Name)
	}
	ev := d.Of.Event()
	field := d.Of.Field()
	switch d.Kind {
	case Sum:
		if d.Of != InputTokens && d.Of != OutputTokens && field == "" {
			add(string(d.Kind), "sum of %q: want inputTokens, outputTokens or input.FIELD", d.Of)
		}
	case CountDistinct:
		if field == "" {
			add(string(d.Kind), "countDistinct of %q: want input.FIELD", d.Of)
		}
	default:
		if d.Of != ToolCalls && d.Of != Turns {
			add(string(d.Kind), "%s of %q: want toolCalls or turns", d.Kind, d.Of)
		}
	}
	if field != "" && !fieldPattern.MatchString(field) {
		add(string(d.Kind), "input field %q: want a name or a dotted path of names", field)
	}
	if len(d.Tools) > 0 && ev != EventToolCall {
		add("tools", "tools applies to tool calls, not to %s", d.Of)
	}
	for _, o := range d.Outcomes {
		valid := outcomesOf[ev]
		if !slices.Contains(valid, o) {
			if len(valid) == 0 {
				add("outcomes", "%s have no outcomes", d.Of)
			} else {
				add("outcomes", "unknown outcome %q for %s%s", o, ev, didYouMean(o, valid))
			}
		}
	}
	for _, p := range d.Scope {
		if (p.Kind == ScopeTool || p.Kind == ScopeInput) && ev != EventToolCall {
			add("by", "scope %s applies to tool calls, not to %s", p, d.Of)
		}
		if p.Kind == ScopeInput && !fieldPattern.MatchString(p.Field) {
			add("by", "input field %q: want a name or a dotted path of names", p.Field)
		}
	}
	w := d.Window
	switch {
	case w.Calendar == "" && w.Within <= 0:
		add("within", "a window is required: within (a duration) or calendar (hour, day, month)")
	case w.Calendar != "" && w.Within != 0:
		add("within", "within and calendar exclude each other")
	case w.Calendar != "" && !slices.Contains([]Calendar{Hour, Day, Month}, w.Calendar):
		add("calendar", "unknown calendar %q (want hour, day or month)", w.Calendar)
	case w.Calendar == "" && w.Resolution < 0:
		add("resolution", "resolution must be positive")
	case w.Calendar == "" && w.Resolution > w.Within:
		add("resolution", "resolution %v is longer than the window %v", w.Resolution, w.Within)
	case w.Calendar == "" && w.Resolution%time.Millisecond != 0:
		add("resolution", "resolution %v is not a whole number of milliseconds", w.Resolution)
	}
	return ps
}

// problem is one thing wrong with a declaration, at the key that says it.
type problem struct {
	key, msg string
}
