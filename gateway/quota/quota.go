// Package quota enforces the config's quotas (gateway/config.Quota): turns
// per window and input/output token budgets per tenant, principal or
// agent, written without Rego and compiled onto declared state
// (policy/state, gateway/rulestate), so they are exact across replicas.
//
// A turn is admitted by AdmitTurn before its session is locked and its
// model called: the turn is counted and every applicable quota read in one
// step serialised per scope key (one store round trip on PostgreSQL), so
// of 60 concurrent turns against a limit of 20, exactly 20 are admitted,
// on however many replicas. A turn over a limit is refused
// (*ExceededError) and counts as refused, not admitted. Token usage is
// recorded after each model step (Hooks); a turn whose token budget is
// used up stops at its next step boundary (StepBudget). Tokens are known
// only once the provider reports them, so a budget can be overshot by the
// steps that were already running when it ran out; turns never are.
package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/rulestate"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/state"
)

// Where a quota stopped something, as counted.
const (
	AtTurn = "turn" // a turn refused before its model was called
	AtStep = "step" // a running turn stopped at a step boundary
)

// Options configure Quotas.
type Options struct {
	// Record receives the decision record of each refusal; nil: none.
	Record func(*policy.Record)
	// Exceeded counts each refusal by quota name, per and AtTurn/AtStep;
	// nil: not counted.
	Exceeded func(name, per, at string)
	// Used is told, for every quota read for a turn of tenant, how much of
	// its limit is used; nil: not told.
	Used func(name, tenant string, used, limit int64)
	// Now is the clock of retry times; nil: time.Now. The Tracker has its
	// own for the windows.
	Now    func() time.Time
	Logger *slog.Logger
}

// Quotas are the configured quotas, ready to enforce. A nil *Quotas (no
// quotas configured) admits everything and touches nothing.
type Quotas struct {
	tr   *rulestate.Tracker
	opts Options
	all  []*quota
	// limits are the quotas' limits by index, swapped whole by SetLimits.
	limits atomic.Pointer[[]int64]
	// sets caches the state.Set of each combination of applicable quotas
	// (keyed by their indices): at most one per combination the filters
	// allow, so it stays small.
	sets sync.Map
}

// quota is one configured quota and its declared state.
type quota struct {
	index int
	cfg   config.Quota
	decl  *state.Decl
	what  string // turns, inputTokens, outputTokens
}

// StateName is the name of quota name's declared state.
func StateName(name string) string { return "quota_" + strings.ReplaceAll(name, "-", "_") }

// New compiles qs (validated by config.Validate) onto tr; nil when qs is
// empty.
func New(qs []config.Quota, tr *rulestate.Tracker, opts Options) (*Quotas, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	q := &Quotas{tr: tr, opts: opts}
	var decls []*state.Decl
	limits := make([]int64, len(qs))
	for i, c := range qs {
		what, limit := c.Limit()
		limits[i] = limit
		d := &state.Decl{Name: StateName(c.Name), Kind: state.Sum, Window: window(&c)}
		switch what {
		case "turns":
			d.Kind, d.Of, d.Outcomes = state.Count, state.Turns, []string{state.OutcomeAdmitted}
		case "inputTokens":
			d.Of = state.InputTokens
		default:
			d.Of = state.OutputTokens
		}
		for _, p := range c.QuotaParts() {
			d.Scope = append(d.Scope, state.ScopePart{Kind: state.ScopeKind(p)})
		}
		decls = append(decls, d)
		q.all = append(q.all, &quota{index: i, cfg: c, decl: d, what: what})
	}
	if _, err := state.NewSet(decls...); err != nil {
		return nil, fmt.Errorf("quotas: %w", err)
	}
	q.limits.Store(&limits)
	return q, nil
}

// SetLimits makes the limits of qs, the quotas of a reloaded config, the
// ones the next checks read, all at once; the counts in the store go on.
// qs must be the quotas q was made of but for their limits' values (the
// same list, each limiting the same thing), or else SetLimits changes
// nothing and says which quota differs. A nil Quotas takes an empty qs.
func (q *Quotas) SetLimits(qs []config.Quota) error {
	var all []*quota
	if q != nil {
		all = q.all
	}
	if len(qs) != len(all) {
		return fmt.Errorf("quotas: %d quotas, not %d: needs a restart", len(qs), len(all))
	}
	if q == nil {
		return nil
	}
	limits := make([]int64, len(qs))
	for i := range qs {
		what, limit := qs[i].Limit()
		if x := q.all[i]; qs[i].Name != x.cfg.Name || what != x.what {
			return fmt.Errorf("quotas[%d]: %s limiting %s, not %s limiting %s: needs a restart", i, qs[i].Name, what, x.cfg.Name, x.what)
		}
		limits[i] = limit
	}
	q.limits.Store(&limits)
	return nil
}

// window is the declared window of c.
func window(c *config.Quota) state.Window {
	if d := c.SlidingWindow(); d > 0 {
		return state.Window{Within: d}
	}
	return state.Window{Calendar: state.Calendar(c.Window), Location: c.Location()}
}

// applicable returns the quotas that apply to id's turns (its tenant's
// and agent's); with tokens, only the token budgets among them.
func (q *Quotas) applicable(id *engine.Identity, tokens bool) []*quota {
	var out []*quota
	for _, x := range q.all {
		if (x.cfg.Tenant == "" || x.cfg.Tenant == id.Principal.Tenant) && (x.cfg.Agent == "" || x.cfg.Agent == id.Agent) &&
			(!tokens || x.what != "turns") {
			out = append(out, x)
		}
	}
	return out
}

// setOf returns the state.Set of qs.
func (q *Quotas) setOf(qs []*quota) *state.Set {
	var key strings.Builder
	for _, x := range qs {
		key.WriteString(strconv.Itoa(x.index))
		key.WriteByte(',')
	}
	if s, ok := q.sets.Load(key.String()); ok {
		return s.(*state.Set)
	}
	decls := make([]*state.Decl, len(qs))
	for i, x := range qs {
		decls[i] = x.decl
	}
	s, err := state.NewSet(decls...)
	if err != nil {
		panic(err) // New checked every declaration
	}
	q.sets.Store(key.String(), s)
	return s
}

// ErrUnavailable refuses a turn whose quotas could not be checked (the
// store did not answer): the quotas fail closed.
var ErrUnavailable = errors.New("the quotas could not be checked")

// ExceededError refuses a turn, or stops one, over a quota.
type ExceededError struct {
	Quota string
	// What is turns, inputTokens or outputTokens; Per the quota's key.
	What, Per string
	// Window is the quota's window as written (1m, day).
	Window string
	Limit  int64
	Used   int64
	// RetryAfter is when the quota has room again at the latest.
	RetryAfter time.Duration
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("quota %s is used up: %d %s per %s per %s; retry in %s", e.Quota, e.Limit, e.What, e.Window, e.Per,
		e.RetryAfter.Round(time.Second))
}

// Admission is an admitted turn's place in the turn quotas.
type Admission struct {
	pending *rulestate.Pending
}

// Refuse counts the admitted turn as refused after all: another check
// refused it before it ran. Safe on a nil Admission.
func (a *Admission) Refuse(ctx context.Context) error {
	if a == nil {
		return nil
	}
	return a.pending.Settle(context.WithoutCancel(ctx), state.OutcomeRefused)
}

// AdmitTurn counts the turn of id against its turn quotas and reads its
// token budgets, in one serialised step; a turn over any of them is
// refused with an *ExceededError (and counts as refused). A store failure
// refuses the turn too (the error): the quotas fail closed.
func (q *Quotas) AdmitTurn(ctx context.Context, id *engine.Identity) (*Admission, error) {
	if q == nil {
		return nil, nil
	}
	app := q.applicable(id, false)
	if len(app) == 0 {
		return nil, nil
	}
	reads := make([]*state.Decl, len(app))
	for i, x := range app {
		reads[i] = x.decl
	}
	vals, pend, err := q.tr.Admit(ctx, &rulestate.Event{Kind: state.EventTurn, Identity: *id}, reads, q.setOf(app))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if ex := q.over(app, *q.limits.Load(), vals, id, AtTurn); ex != nil {
		if err := pend.Settle(context.WithoutCancel(ctx), state.OutcomeRefused); err != nil {
			q.opts.Logger.Warn("settling a refused turn in the quotas", "requestId", id.RequestID, "err", err)
		}
		return nil, ex
	}
	return &Admission{pending: pend}, nil
}

// over returns the refusal of the first quota of qs whose value in vals
// is at its limit in limits (by quota index), with the longest wait of those that are, after
// recording and counting it; nil when none is.
func (q *Quotas) over(qs []*quota, limits []int64, vals state.Values, id *engine.Identity, at string) *ExceededError {
	var ex *ExceededError
	var fired []string
	now := q.opts.Now()
	for _, x := range qs {
		used, limit := number(vals[x.decl.Name]), limits[x.index]
		if q.opts.Used != nil {
			q.opts.Used(x.cfg.Name, id.Principal.Tenant, used, limit)
		}
		if used < limit {
			continue
		}
		wait := x.decl.Window.Reset(now).Sub(now)
		fired = append(fired, "quota/"+x.cfg.Name)
		if q.opts.Exceeded != nil {
			q.opts.Exceeded(x.cfg.Name, x.cfg.Per, at)
		}
		if ex == nil {
			ex = &ExceededError{Quota: x.cfg.Name, What: x.what, Per: x.cfg.Per, Window: x.cfg.Window, Limit: limit, Used: used, RetryAfter: wait}
		}
		ex.RetryAfter = max(ex.RetryAfter, wait)
	}
	if ex == nil || q.opts.Record == nil {
		return ex
	}
	hook, decision := policy.HookBeforeTurn, map[string]any{"refuse": ex.Error()}
	if at == AtStep {
		hook, decision = policy.HookBeforeStep, map[string]any{"stop": ex.Error()}
	}
	decision["quota"], decision["limit"], decision["used"], decision["retryAfterMs"] = ex.Quota, ex.Limit, ex.Used, ex.RetryAfter.Milliseconds()
	q.opts.Record(&policy.Record{Time: now, Hook: hook, RequestID: id.RequestID, SessionID: id.SessionID, Agent: id.Agent,
		Tenant: id.Principal.Tenant, Outcome: policy.OutcomeMatched, RulesFired: fired, Decision: decision})
	return ex
}

// number reads a state value (json.Number, or a Go number) as an int64,
// rounding a token sum up.
func number(v any) int64 {
	switch n := v.(type) {
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i
		}
		f, _ := n.Float64()
		return int64(math.Ceil(f))
	case int64:
		return n
	case float64:
		return int64(math.Ceil(n))
	}
	return 0
}

// StepBudget returns the engine's step budget for the turn of id
// (engine.TurnRequest.StepBudget): after a step, a token budget at its
// limit stops the turn, naming the quota; nil when no token quota applies.
// A failed read stops the turn too (closed). The limits are those when the
// turn started: a reload applies to the next turn.
func (q *Quotas) StepBudget(id engine.Identity) func(context.Context) string {
	if q == nil {
		return nil
	}
	app := q.applicable(&id, true)
	if len(app) == 0 {
		return nil
	}
	reads := make([]*state.Decl, len(app))
	for i, x := range app {
		reads[i] = x.decl
	}
	limits := *q.limits.Load()
	return func(ctx context.Context) string {
		vals, err := q.tr.Read(ctx, &rulestate.Event{Kind: state.EventTokens, Identity: id}, reads)
		if err != nil {
			q.opts.Logger.Error("reading the token quotas; the turn stops", "requestId", id.RequestID, "err", err)
			return "the token quotas could not be checked"
		}
		if ex := q.over(app, limits, vals, &id, AtStep); ex != nil {
			return fmt.Sprintf("quota %s used up: %d %s per %s", ex.Quota, ex.Limit, ex.What, ex.Window)
		}
		return ""
	}
}

// Hooks returns the observer that records each model step's token usage
// against the token quotas that apply to its turn; nil Quotas: none.
func (q *Quotas) Hooks() engine.Hooks {
	if q == nil {
		return nil
	}
	return hooks{q: q}
}

type hooks struct {
	engine.NopHooks
	q *Quotas
}

func (h hooks) OnStepFinish(ctx context.Context, s *engine.StepResult) {
	if s.Usage.InputTokens == 0 && s.Usage.OutputTokens == 0 {
		return
	}
	app := h.q.applicable(&s.Identity, true)
	if len(app) == 0 {
		return
	}
	ev := &rulestate.Event{Kind: state.EventTokens, Identity: s.Identity, InputTokens: s.Usage.InputTokens, OutputTokens: s.Usage.OutputTokens}
	if err := h.q.tr.Record(context.WithoutCancel(ctx), ev, h.q.setOf(app)); err != nil {
		h.q.opts.Logger.Error("recording token usage in the quotas", "requestId", s.RequestID, "err", err)
	}
}

// MaxUsageRows bounds the keys Usage reports of one quota.
const MaxUsageRows = 100

// Usage is a quota's current count for one of its keys: the parts of the
// key its Per names are set (Tenant too for a principal, whose subject is
// its tenant's).
type Usage struct {
	Tenant    string `json:"tenant,omitempty"`
	Principal string `json:"principal,omitempty"`
	Agent     string `json:"agent,omitempty"`
	// Used is what the key used in the current window (admitted turns, or
	// tokens rounded up), Limit the quota's bound.
	Used  int64 `json:"used"`
	Limit int64 `json:"limit"`
	// Since is when the current window started.
	Since time.Time `json:"since"`
}

// UsageReport is Usage's answer: each quota's rows by name, and the
// quotas that had more keys than MaxUsageRows.
type UsageReport struct {
	Rows      map[string][]Usage
	Truncated map[string]bool
}

// Usage reads the current count of each quota for the keys of ids (one
// store read per identity that brings a key not read yet), in the order
// of ids; at most MaxUsageRows keys per quota. The counts are the store's,
// every replica's turns. A store failure is ErrUnavailable.
func (q *Quotas) Usage(ctx context.Context, ids []engine.Identity) (UsageReport, error) {
	rep := UsageReport{Rows: map[string][]Usage{}, Truncated: map[string]bool{}}
	if q == nil {
		return rep, nil
	}
	now, limits := q.opts.Now(), *q.limits.Load()
	type seenKey struct {
		quota int
		key   Usage
	}
	seen := map[seenKey]bool{}
	for i := range ids {
		id := &ids[i]
		var reads []*state.Decl
		var rows []Usage
		var of []*quota
		for _, x := range q.applicable(id, false) {
			u := x.key(id)
			if seen[seenKey{x.index, u}] {
				continue
			}
			seen[seenKey{x.index, u}] = true
			if len(rep.Rows[x.cfg.Name]) >= MaxUsageRows {
				rep.Truncated[x.cfg.Name] = true
				continue
			}
			reads, rows, of = append(reads, x.decl), append(rows, u), append(of, x)
		}
		if len(reads) == 0 {
			continue
		}
		vals, err := q.tr.Read(ctx, &rulestate.Event{Kind: state.EventTurn, Identity: *id}, reads)
		if err != nil {
			return UsageReport{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		for j, x := range of {
			u := rows[j]
			u.Used, u.Limit, u.Since = number(vals[x.decl.Name]), limits[x.index], x.decl.Window.Start(now).UTC()
			rep.Rows[x.cfg.Name] = append(rep.Rows[x.cfg.Name], u)
		}
	}
	return rep, nil
}

// key is the key of x that counts id's turns, as a Usage with its parts
// set.
func (x *quota) key(id *engine.Identity) Usage {
	var u Usage
	for _, p := range x.cfg.QuotaParts() {
		switch p {
		case config.QuotaPerTenant:
			u.Tenant = id.Principal.Tenant
		case config.QuotaPerPrincipal:
			u.Tenant, u.Principal = id.Principal.Tenant, id.Principal.Subject
		case config.QuotaPerAgent:
			u.Agent = id.Agent
		}
	}
	return u
}
