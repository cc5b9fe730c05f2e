// Package rulestate computes the declared rule state (policy/state) of the
// gateway's events and records the events that state counts, in the
// store's rule_state_events (gateway/store.StateStore).
//
// For each event (a tool call when beforeToolCall decides it, a turn when
// it starts, a model call's token usage) the Tracker reads the states the
// revision's rules read for that event, and only those (Revision.StateReads,
// derived from the compiled rules), and records the event for every
// declaration that counts it, in one atomic step serialised per scope key
// (one store round trip on PostgreSQL): Admit. The event is recorded under
// a tentative outcome (executed, admitted) and settled when the decision
// says otherwise (blocked, substituted, approval, error; refused), so a
// value read by one event counts every event of its key admitted before it,
// on every replica. Counting on admission is what keeps a limit exact: an
// allowed call counts as executed even when the tool then fails or the
// gateway crashes before it runs, and a blocked call never counts as
// executed. Between a call's admission and its settlement a concurrent
// call of the same key sees it as executed: the error is towards refusing.
//
// With no declared state that an event's rules read or that counts the
// event, the Tracker touches neither the store nor the heap.
package rulestate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy/state"
)

// Default pruning.
const (
	// DefaultPruneInterval is how often Run prunes expired rows.
	DefaultPruneInterval = time.Minute
	// DefaultPruneBatch bounds one pruning statement, so pruning never
	// holds the store for long; Run prunes batches until one comes back
	// short, at most maxBatchesPerPrune of them per interval.
	DefaultPruneBatch  = 1000
	maxBatchesPerPrune = 50
)

// Options configures a Tracker.
type Options struct {
	// Now is the clock events are recorded and windows computed by; nil
	// means time.Now. Tests inject one to expire windows without waiting.
	Now func() time.Time
	// Logger receives failures that change no decision (settling,
	// recording token usage, pruning); nil means slog.Default().
	Logger *slog.Logger
	// PruneInterval and PruneBatch tune Run; zero means the defaults.
	PruneInterval time.Duration
	PruneBatch    int
}

// Tracker reads and records declared rule state. It is safe for
// concurrent use.
type Tracker struct {
	st   store.StateStore
	opts Options
}

// New returns a Tracker over st.
func New(st store.StateStore, opts Options) *Tracker {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PruneInterval <= 0 {
		opts.PruneInterval = DefaultPruneInterval
	}
	if opts.PruneBatch <= 0 {
		opts.PruneBatch = DefaultPruneBatch
	}
	return &Tracker{st: st, opts: opts}
}

// Event is one gateway event state may count.
type Event struct {
	Kind state.EventKind
	engine.Identity
	// Tool and Input are a tool call's tool name and input (for scopes
	// tool and input.FIELD, sums and distinct values of input fields).
	Tool  string
	Input json.RawMessage
	// InputTokens and OutputTokens are a tokens event's usage.
	InputTokens, OutputTokens int
}

// Pending is an admitted event whose outcome may still change.
type Pending struct {
	t       *Tracker
	writes  []store.StateWrite
	at      time.Time
	outcome string
}

// Settle changes the recorded outcome of the event to outcome (no store
// access when it is the outcome already recorded). A nil Pending (an event
// nothing counts) settles nothing.
func (p *Pending) Settle(ctx context.Context, outcome string) error {
	if p == nil || outcome == p.outcome {
		return nil
	}
	from := p.outcome
	p.outcome = outcome
	return p.t.st.SettleState(ctx, &store.StateSettlement{Writes: p.writes, At: p.at, From: from, To: outcome})
}

// Admit reads the states reads for ev and records ev for every
// declaration of counts that counts it, under the tentative outcome
// (executed for tool calls, admitted for turns), as one serialised step.
// The values are those before ev. When nothing is read or counted it
// returns nil values and a nil Pending without touching the store.
func (t *Tracker) Admit(ctx context.Context, ev *Event, reads []*state.Decl, counts *state.Set) (state.Values, *Pending, error) {
	counting := counts.Counting(ev.Kind, ev.Tool)
	if len(reads) == 0 && len(counting) == 0 {
		return nil, nil, nil
	}
	now := t.opts.Now()
	a := &store.StateAdmission{At: now, Outcome: tentative(ev.Kind)}
	a.Reads = t.storeReads(ev, reads, now)
	var p *Pending
	if len(counting) > 0 {
		a.Writes = writes(ev, counting, now)
		if len(a.Writes) > 0 {
			p = &Pending{t: t, writes: a.Writes, at: now, outcome: a.Outcome}
		}
	}
	var rs []store.StateReading
	if len(a.Reads) > 0 || len(a.Writes) > 0 {
		var err error
		if rs, err = t.st.AdmitState(ctx, a); err != nil {
			return nil, nil, err
		}
	}
	return values(reads, outOfScopeZero(ev, reads, rs), now), p, nil
}

// Record records ev for every declaration of counts that counts it, with
// no reads (a model call's token usage).
func (t *Tracker) Record(ctx context.Context, ev *Event, counts *state.Set) error {
	_, _, err := t.Admit(ctx, ev, nil, counts)
	return err
}

// Read reads the states reads for ev without recording it.
func (t *Tracker) Read(ctx context.Context, ev *Event, reads []*state.Decl) (state.Values, error) {
	v, _, err := t.Admit(ctx, ev, reads, nil)
	return v, err
}

// tentative is the outcome an event is recorded with on admission.
func tentative(k state.EventKind) string {
	switch k {
	case state.EventToolCall:
		return state.OutcomeExecuted
	case state.EventTurn:
		return state.OutcomeAdmitted
	}
	return ""
}

func (t *Tracker) storeReads(ev *Event, reads []*state.Decl, now time.Time) []store.StateRead {
	if len(reads) == 0 {
		return nil
	}
	out := make([]store.StateRead, 0, len(reads))
	for _, d := range reads {
		if inScope(d, ev) {
			out = append(out, store.StateRead{Key: scopeKey(d, ev), From: d.Window.Start(now), Outcomes: d.MatchOutcomes()})
		}
	}
	return out
}

// inScope reports whether ev has a value for every scope part of d: a
// tool call whose input lacks a field d is scoped by (absent or null) is
// in no scope of d. It is not counted, and d reads for it as for a scope
// where nothing happened, so calls without the field never share one
// bucket (a verify_payee without a payee verifies no wire_transfer
// without one).
func inScope(d *state.Decl, ev *Event) bool {
	for _, p := range d.Scope {
		if p.Kind == state.ScopeInput {
			if _, ok := field(ev.Input, p.Field); !ok {
				return false
			}
		}
	}
	return true
}

// outOfScopeZero returns the readings of reads in order, given rs, those
// of the reads ev is in scope of (storeReads): a zero reading stands for
// each of the others.
func outOfScopeZero(ev *Event, reads []*state.Decl, rs []store.StateReading) []store.StateReading {
	if len(rs) == len(reads) {
		return rs
	}
	out := make([]store.StateReading, len(reads))
	j := 0
	for i, d := range reads {
		if inScope(d, ev) {
			out[i] = rs[j]
			j++
		}
	}
	return out
}

// writes are ev's rows: one per counting declaration, skipping sums and
// distinct counts of an input field the call's input lacks and the
// declarations ev is in no scope of (inScope).
func writes(ev *Event, counting []*state.Decl, now time.Time) []store.StateWrite {
	out := make([]store.StateWrite, 0, len(counting))
	for _, d := range counting {
		if !inScope(d, ev) {
			continue
		}
		w := store.StateWrite{Key: scopeKey(d, ev), Bucket: d.Window.Bucket(now), Expires: d.Expiry(now)}
		switch {
		case d.Of == state.InputTokens:
			w.Value = float64(ev.InputTokens)
		case d.Of == state.OutputTokens:
			w.Value = float64(ev.OutputTokens)
		case d.Of.Field() != "":
			raw, ok := field(ev.Input, d.Of.Field())
			if !ok {
				continue
			}
			if d.Kind == state.Sum {
				f, err := strconv.ParseFloat(string(raw), 64)
				if err != nil {
					continue // not a number: nothing to add
				}
				w.Value = f
			} else {
				w.Item = string(raw)
			}
		}
		out = append(out, w)
	}
	return out
}

// values turns the readings into the values rules see.
func values(reads []*state.Decl, rs []store.StateReading, now time.Time) state.Values {
	if len(reads) == 0 {
		return nil
	}
	v := make(state.Values, len(reads))
	for i, d := range reads {
		r := rs[i]
		switch d.Kind {
		case state.Count:
			v[d.Name] = json.Number(strconv.FormatInt(r.Count, 10))
		case state.CountDistinct:
			v[d.Name] = json.Number(strconv.FormatInt(r.Distinct, 10))
		case state.Sum:
			v[d.Name] = json.Number(strconv.FormatFloat(r.Sum, 'f', -1, 64))
		case state.HappenedBefore:
			at := ""
			if r.Count > 0 {
				at = r.Last.UTC().Format(time.RFC3339Nano)
			}
			v[d.Name] = map[string]any{"happened": r.Count > 0, "at": at}
		case state.TimeSinceLast:
			if r.Count > 0 {
				v[d.Name] = json.Number(strconv.FormatFloat(now.Sub(r.Last).Seconds(), 'f', -1, 64))
			}
		}
	}
	return v
}

// scopeKey names the rows of declaration d for ev: a hash of d's
// fingerprint and ev's value of each scope part.
func scopeKey(d *state.Decl, ev *Event) string {
	h := sha256.New()
	h.Write([]byte(d.Fingerprint()))
	for _, p := range d.Scope {
		var v string
		switch p.Kind {
		case state.ScopeTenant:
			v = ev.Principal.Tenant
		case state.ScopePrincipal:
			v = ev.Principal.Tenant + "\x00" + ev.Principal.Subject
		case state.ScopeAgent:
			v = ev.Agent
		case state.ScopeSession:
			v = ev.Principal.Tenant + "\x00" + ev.SessionID
		case state.ScopeTool:
			v = ev.Tool
		case state.ScopeInput:
			raw, _ := field(ev.Input, p.Field)
			v = string(raw)
		}
		// Length-prefixed: no two value lists hash alike.
		h.Write([]byte("\x00" + strconv.Itoa(len(v)) + ":" + v))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// field returns the compact JSON of the value at the dotted path in the
// object input; ok is false when there is none.
func field(input json.RawMessage, path string) (json.RawMessage, bool) {
	cur := input
	for name := range strings.SplitSeq(path, ".") {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		next, ok := obj[name]
		if !ok {
			return nil, false
		}
		cur = next
	}
	dec := json.NewDecoder(bytes.NewReader(cur))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || v == nil {
		return nil, false
	}
	compact, err := json.Marshal(exactNumbers(v))
	if err != nil {
		return nil, false
	}
	return compact, true
}

// exactNumbers returns v with each number written as exactNumber does,
// objects and arrays walked.
func exactNumbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		return exactNumber(v)
	case map[string]any:
		for k, e := range v {
			v[k] = exactNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = exactNumbers(e)
		}
	}
	return v
}

// maxExactNumber bounds the numbers exactNumber rewrites: a longer one,
// or one whose exponent is beyond ±maxExactExponent, stays as written
// (1e1000000000 would take big.Rat gigabytes).
const (
	maxExactNumber   = 100
	maxExactExponent = 400
)

// exactNumber writes n as the shortest decimal of its exact value, so one
// number has one spelling (1, 1.0, 1e0 and 10e-1 are one payee) and two
// numbers never share one: as a float64, 9007199254740993 was
// 9007199254740992, another payee's scope.
func exactNumber(n json.Number) json.Number {
	s := string(n)
	if len(s) > maxExactNumber {
		return n
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > maxExactExponent || e < -maxExactExponent {
			return n
		}
		mant, exp = s[:i], e
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return n
	}
	places := 0
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		places = len(mant) - i - 1
	}
	out := r.FloatString(max(0, places-exp))
	if strings.Contains(out, ".") {
		out = strings.TrimRight(strings.TrimRight(out, "0"), ".")
	}
	return json.Number(out)
}

// Prune deletes expired rows in batches of PruneBatch until a batch comes
// back short (at most maxBatchesPerPrune) and returns how many it deleted.
func (t *Tracker) Prune(ctx context.Context) (int, error) {
	total := 0
	for range maxBatchesPerPrune {
		n, err := t.st.PruneState(ctx, t.opts.Now(), t.opts.PruneBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("pruning rule state: %w", err)
		}
		if n < t.opts.PruneBatch {
			break
		}
	}
	return total, nil
}

// Run prunes every PruneInterval until ctx ends.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTicker(t.opts.PruneInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := t.Prune(ctx); err != nil && ctx.Err() == nil {
				t.opts.Logger.Warn("pruning rule state", "err", err)
			}
		}
	}
}
