package erasure

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/store"
)

// Retention's bounds: a sweep reads candidates RetentionBatch at a time,
// at most maxRetentionBatches batches per scope (the next sweep goes on),
// so no sweep holds the store long.
const (
	RetentionBatch      = 100
	maxRetentionBatches = 10
)

// Retention erases the sessions idle longer than their tenant's or
// agent's retention, each with a tombstone of reason
// audit.ErasureRetention. It is safe on every replica at once: each erasure
// takes the session's turn lock (Hold) and erases only a session still
// idle (store.EraseSession's idleBefore), so a session another replica
// erased, or one that became active, is skipped.
type Retention struct {
	Store store.Store
	Log   *audit.Log
	// Tenants and Agents map a tenant or agent to how long its idle
	// sessions are kept; a session named by both is kept the shorter.
	Tenants, Agents map[string]time.Duration
	// Hold takes the session's turn lock without waiting; ok is false
	// when a turn holds it (the session is skipped).
	Hold func(ctx context.Context, tenant, id string) (release func(), ok bool, err error)
	Now  func() time.Time
	// Pruned, if set, is told of each erased session.
	Pruned func(tenant, agent string)
	// Erased is each erasure's Request.Erased.
	Erased  func(tenant, sessionID string)
	Replica string
	Logger  *slog.Logger
}

// Sweep erases the idle sessions of every configured scope, a bounded
// batch at a time, and returns how many it erased. A store error ends the
// sweep (the next one retries).
func (r *Retention) Sweep(ctx context.Context) (int, error) {
	total := 0
	for _, t := range slices.Sorted(maps.Keys(r.Tenants)) {
		n, err := r.sweep(ctx, t, "", r.Tenants[t])
		total += n
		if err != nil {
			return total, err
		}
	}
	for _, a := range slices.Sorted(maps.Keys(r.Agents)) {
		n, err := r.sweep(ctx, "", a, r.Agents[a])
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// sweep erases the idle sessions of one scope (tenant, or agent in every
// tenant), idle longer than keep.
func (r *Retention) sweep(ctx context.Context, tenant, agent string, keep time.Duration) (int, error) {
	now := r.Now().UTC()
	before := now.Add(-keep)
	total := 0
	for range maxRetentionBatches {
		batch, err := r.Store.IdleSessions(ctx, tenant, agent, before, RetentionBatch)
		if err != nil {
			return total, err
		}
		erased := 0
		for _, s := range batch {
			ok, err := r.erase(ctx, s, before, now)
			if err != nil {
				return total, err
			}
			if ok {
				erased++
			}
		}
		total += erased
		// A short batch was the last; one that erased nothing would be
		// read again as it is (its sessions run turns).
		if len(batch) < RetentionBatch || erased == 0 {
			break
		}
	}
	return total, nil
}

// erase erases s if it is still idle since before and no turn of it
// runs; false when it was skipped.
func (r *Retention) erase(ctx context.Context, s store.Session, before, now time.Time) (bool, error) {
	release, ok, err := r.Hold(ctx, s.Tenant, s.ID)
	if err != nil || !ok {
		return false, err // !ok: a turn runs; the next sweep looks again
	}
	defer release()
	t, err := Erase(ctx, r.Store, r.Log, now, Request{Tenant: s.Tenant, SessionID: s.ID, Reason: audit.ErasureRetention,
		IdleBefore: before, Replica: r.Replica, Erased: r.Erased})
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		return false, nil // active again, or erased by another replica
	case err != nil:
		return false, err
	}
	if r.Pruned != nil {
		r.Pruned(t.Tenant, t.Agent)
	}
	if r.Logger != nil {
		r.Logger.Info("session erased by retention", "tenant", s.Tenant, "agent", t.Agent, "session", s.ID)
	}
	return true, nil
}
