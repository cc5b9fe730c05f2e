// Package killswitch is the operators' emergency stop: a switch set through
// the admin API stops every tool call, the tool calls matching names or
// patterns, or every turn, for the whole fleet, one tenant or one agent,
// until it is lifted or expires.
//
// Switches live in the store, so they survive restarts and reach every
// replica of a shared database: a write notifies the replicas (PostgreSQL
// LISTEN/NOTIFY), which read the switches again at once, and each replica
// also reads them every PollInterval, in case it missed a notification.
// The decision path never touches the store: it reads the replica's copy.
// A switch is not a rule: a rules reload cannot lift it.
//
// A stopped tool call is an ordinary decision: blocked with the fixed
// ToolReason the model sees, a decision record naming the switch, a count
// in the metrics. A stopped turn is refused before its model is called
// (*StoppedError), and a running one ends before its next model step
// (CheckStep).
package killswitch

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy"
)

// The fixed texts of a stop: the model and the client see these, never
// the operator's reason (which may name the incident).
const (
	// ToolReason is what the model sees as a stopped tool call's output.
	ToolReason = "This tool call was stopped by the operator's kill switch."
	// TurnReason is the refusal of a stopped turn.
	TurnReason = "This turn was stopped by the operator's kill switch."
)

// PollInterval is how often a replica reads the switches when no
// notification came: the bound on how late one that missed its
// notification applies a change.
const PollInterval = time.Second

// Options configure Switches.
type Options struct {
	// Store keeps the switches. Required.
	Store store.KillSwitches
	// Record receives the decision record of each stop; nil: none.
	Record func(*policy.Record)
	// Stopped counts each stop by what (WhatToolCall, WhatTurn) and the
	// switch's scope kind (ScopeKind); nil: not counted.
	Stopped func(what, scope string)
	// Now is the clock (expiry); nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// What a stop stopped, as counted.
const (
	WhatToolCall = "tool_call"
	WhatTurn     = "turn"
)

// Switches is a replica's view of the kill switches in force. It is safe
// for concurrent use.
type Switches struct {
	opts Options
	// list is the switches last read from the store, in force or expired
	// since: the decision path filters by its clock.
	list atomic.Pointer[[]store.KillSwitch]
	// loadMu orders loads, so an older read never replaces a newer one.
	loadMu sync.Mutex
	wake   chan struct{}
}

// New returns the switches of opts.Store; call Load before serving.
func New(opts Options) *Switches {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Switches{opts: opts, wake: make(chan struct{}, 1)}
	s.list.Store(&[]store.KillSwitch{})
	return s
}

// Load reads the switches from the store.
func (s *Switches) Load(ctx context.Context) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	list, err := s.opts.Store.KillSwitches(ctx, s.opts.Now())
	if err != nil {
		return err
	}
	s.list.Store(&list)
	return nil
}

// Wake asks Run to read the switches now (a notification came).
func (s *Switches) Wake() {
	select {
	case s.wake <- struct{}{}:
	default: // a read is pending already
	}
}

// Run reads the switches at every Wake and every poll until ctx is done;
// a failed read is logged and the last switches read stay in force.
func (s *Switches) Run(ctx context.Context, poll time.Duration) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-t.C:
		}
		if err := s.Load(ctx); err != nil && ctx.Err() == nil {
			s.opts.Logger.Error("reading kill switches; the last ones read stay in force", "err", err)
		}
	}
}

// Set stores k and applies it on this replica before it returns (other
// replicas at their notification or next poll).
func (s *Switches) Set(ctx context.Context, k *store.KillSwitch) error {
	if err := s.opts.Store.PutKillSwitch(ctx, k); err != nil {
		return err
	}
	return s.Load(ctx)
}

// Lift deletes the switch id and returns it, as Set applies.
func (s *Switches) Lift(ctx context.Context, id string) (*store.KillSwitch, error) {
	k, err := s.opts.Store.LiftKillSwitch(ctx, id)
	if err != nil {
		return nil, err
	}
	return k, s.Load(ctx)
}

// Now is the switches' clock, in UTC.
func (s *Switches) Now() time.Time { return s.opts.Now().UTC() }

// Active returns the switches in force now, oldest first.
func (s *Switches) Active() []store.KillSwitch {
	now := s.opts.Now()
	out := []store.KillSwitch{}
	for _, k := range *s.list.Load() {
		if k.InForce(now) {
			out = append(out, k)
		}
	}
	return out
}

// ToolCall returns the first switch in force that stops a call of tool by
// the tenant's agent, nil when none does.
func (s *Switches) ToolCall(tenant, agent, tool string) *store.KillSwitch {
	return s.find(tenant, agent, func(k *store.KillSwitch) bool {
		if k.Block != store.KillTools {
			return false
		}
		if len(k.Tools) == 0 {
			return true
		}
		for _, p := range k.Tools {
			if Match(p, tool) {
				return true
			}
		}
		return false
	})
}

// Turn returns the first switch in force that stops the turns of the
// tenant's agent, nil when none does.
func (s *Switches) Turn(tenant, agent string) *store.KillSwitch {
	return s.find(tenant, agent, func(k *store.KillSwitch) bool { return k.Block == store.KillTurns })
}

func (s *Switches) find(tenant, agent string, stops func(*store.KillSwitch) bool) *store.KillSwitch {
	list := *s.list.Load()
	if len(list) == 0 {
		return nil // the common case: no clock read, no allocation
	}
	now := s.opts.Now()
	for i := range list {
		k := &list[i]
		if (k.Tenant == "" || k.Tenant == tenant) && (k.Agent == "" || k.Agent == agent) && k.InForce(now) && stops(k) {
			return k
		}
	}
	return nil
}

// ScopeKind is the kind of k's scope as counted: fleet, tenant, agent or
// tenant_agent.
func ScopeKind(k *store.KillSwitch) string {
	switch {
	case k.Tenant != "" && k.Agent != "":
		return "tenant_agent"
	case k.Tenant != "":
		return "tenant"
	case k.Agent != "":
		return "agent"
	}
	return "fleet"
}

// RuleName names switch k in decision records (rulesFired).
func RuleName(k *store.KillSwitch) string { return "killswitch/" + k.ID }

// StoppedError refuses a turn that a switch stops.
type StoppedError struct {
	Switch store.KillSwitch
}

// Error is the fixed TurnReason: it may reach a model (a sub-agent's
// refused turn is its parent's tool error), which never sees the switch.
func (e *StoppedError) Error() string { return TurnReason }

// CheckTurn returns a *StoppedError when a switch stops the turn of id,
// after recording the refusal; nil otherwise.
func (s *Switches) CheckTurn(id *engine.Identity) error {
	k := s.Turn(id.Principal.Tenant, id.Agent)
	if k == nil {
		return nil
	}
	s.stopped(id, WhatTurn, k, policy.HookBeforeTurn, map[string]any{"refuse": TurnReason})
	return &StoppedError{Switch: *k}
}

// CheckStep returns, for a running turn of id whose scope a turns switch
// now stops, the stop reason for engine.TurnRequest.StepBudget (the turn
// ends before its next model step), after recording the stop; "" when no
// switch stops it.
func (s *Switches) CheckStep(id *engine.Identity) string {
	k := s.Turn(id.Principal.Tenant, id.Agent)
	if k == nil {
		return ""
	}
	s.stopped(id, WhatTurn, k, policy.HookBeforeStep, map[string]any{"stop": TurnReason})
	return "stopped by the operator's kill switch"
}

// stopped records and counts one stop.
func (s *Switches) stopped(id *engine.Identity, what string, k *store.KillSwitch, hook string, decision any, locate ...func(*policy.Record)) {
	if s.opts.Stopped != nil {
		s.opts.Stopped(what, ScopeKind(k))
	}
	if s.opts.Record == nil {
		return
	}
	r := &policy.Record{Time: s.opts.Now(), Hook: hook, RequestID: id.RequestID, SessionID: id.SessionID, Agent: id.Agent,
		Tenant: id.Principal.Tenant, Outcome: policy.OutcomeMatched, RulesFired: []string{RuleName(k)}, Decision: decision}
	for _, f := range locate {
		f(r)
	}
	s.opts.Record(r)
}

// Hooks returns the switches as engine hooks, to compose before the rules:
// BeforeToolCall blocks a stopped call with ToolReason (the rules do not
// run for it).
func (s *Switches) Hooks() engine.Hooks { return hooks{s: s} }

type hooks struct {
	engine.NopHooks
	s *Switches
}

func (h hooks) BeforeToolCall(_ context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	k := h.s.ToolCall(tc.Principal.Tenant, tc.Agent, tc.ToolName)
	if k == nil {
		return nil, nil
	}
	d := &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: ToolReason}
	step := tc.StepNumber
	h.s.stopped(&tc.Identity, WhatToolCall, k, policy.HookBeforeToolCall, d, func(r *policy.Record) {
		r.StepNumber, r.ToolCallID, r.ToolName, r.ToolKind, r.ToolServer = &step, tc.ToolCallID, tc.ToolName, tc.Tool.Kind, tc.Tool.Server
	})
	return d, nil
}
