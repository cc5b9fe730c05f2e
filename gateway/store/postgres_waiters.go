package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements of the queues of session leases (table session_waiters).
// A waiter's place lives until expires_at, on the database server's clock
// (pgNow); an expired place is ignored by everyone, so the waiters of a
// replica that died stop blocking and counting once their ttl has passed.
const (
	// pgWaitersLock serializes the registrations of a session's waiters
	// across replicas, so the count and the insert are atomic and ids grow
	// in the order of registration.
	pgWaitersLock = `SELECT pg_advisory_xact_lock(hashtext('turngate.waiters'), hashtext($1 || '/' || $2))`
	// An uncounted waiter always gets a place; a counted one while fewer
	// than $6 counted places of the session are live.
	pgEnqueue = `INSERT INTO session_waiters (tenant, session_id, owner, counted, expires_at)
		SELECT $1::text, $2::text, $3::text, $4::boolean, ` + pgNow + ` + $5::bigint
		WHERE NOT $4::boolean OR (SELECT COUNT(*) FROM session_waiters
			WHERE tenant = $1 AND session_id = $2 AND counted AND expires_at > ` + pgNow + `) < $6::bigint
		RETURNING id`
	// The lease is taken as pgAcquireLease takes it (the session's version
	// too), but only by a waiter whose place is live and has no live place
	// before it, whose place goes in the same statement. The row reports
	// whether the place was live, and the lease when taken.
	pgAcquireQueued = `WITH me AS (
			SELECT id FROM session_waiters WHERE id = $5 AND expires_at > ` + pgNow + `),
		got AS (
			INSERT INTO session_leases AS l (tenant, session_id, owner, token, expires_at)
			SELECT $1::text, $2::text, $3::text, 1, ` + pgNow + ` + $4::bigint FROM me
			WHERE NOT EXISTS (SELECT 1 FROM session_waiters w
				WHERE w.tenant = $1 AND w.session_id = $2 AND w.id < $5 AND w.expires_at > ` + pgNow + `)
			ON CONFLICT (tenant, session_id) DO UPDATE
			SET owner = excluded.owner, token = l.token + 1, expires_at = excluded.expires_at, cancelled = false, followed = false
			WHERE l.expires_at <= ` + pgNow + `
			RETURNING token, expires_at),
		gone AS (
			DELETE FROM session_waiters WHERE id = $5 AND EXISTS (SELECT 1 FROM got))
		SELECT EXISTS (SELECT 1 FROM me), (SELECT token FROM got), (SELECT expires_at FROM got),
			(SELECT session_version($1, $2) FROM got)`
	// A waiter that leaves wakes the others when the lease is free: it may
	// have been the one they waited for.
	pgDequeue = `WITH gone AS (
			DELETE FROM session_waiters WHERE id = $1 RETURNING tenant, session_id)
		SELECT pg_notify($2, $3) FROM gone g
		WHERE NOT EXISTS (SELECT 1 FROM session_leases l
			WHERE l.tenant = g.tenant AND l.session_id = g.session_id AND l.expires_at > ` + pgNow + `)
		AND EXISTS (SELECT 1 FROM session_waiters w
			WHERE w.tenant = g.tenant AND w.session_id = g.session_id AND w.id <> $1 AND w.expires_at > ` + pgNow + `)`
	// An expired place stays expired: the waiter lost its place (see
	// ErrNotQueued). Committed without waiting for the WAL flush, as the
	// lease's renewals are.
	pgRenewWaiters = `UPDATE session_waiters SET expires_at = ` + pgNow + ` + $2
		WHERE id = ANY($1) AND expires_at > ` + pgNow + ` AND ` + pgAsyncCommit
	pgSweepWaiters = `DELETE FROM session_waiters WHERE expires_at <= ` + pgNow
)

// Enqueue implements Relay.
func (s *Postgres) Enqueue(ctx context.Context, tenant, sessionID, owner string, counted bool, bound int, ttl time.Duration) (*Waiter, error) {
	if err := leaseArgs(tenant, sessionID, owner, ttl); err != nil {
		return nil, fmt.Errorf("queueing for lease: %w", err)
	}
	w := &Waiter{Tenant: tenant, SessionID: sessionID, Owner: owner}
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, pgWaitersLock, tenant, sessionID); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, pgEnqueue, tenant, sessionID, owner, counted, ttl.Nanoseconds(), bound).Scan(&w.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrTurnQueueFull
		}
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("queueing for lease: %w", err)
	}
	return w, nil
}

// AcquireQueued implements Relay.
func (s *Postgres) AcquireQueued(ctx context.Context, w *Waiter, ttl time.Duration) (*Lease, error) {
	if err := leaseArgs(w.Tenant, w.SessionID, w.Owner, ttl); err != nil {
		return nil, fmt.Errorf("acquiring lease: %w", err)
	}
	var (
		queued                  bool
		token, expires, version *int64
	)
	err := s.pool.QueryRow(ctx, pgAcquireQueued, w.Tenant, w.SessionID, w.Owner, ttl.Nanoseconds(), w.ID).
		Scan(&queued, &token, &expires, &version)
	switch {
	case err != nil:
		return nil, fmt.Errorf("acquiring lease: %w", pgError(err))
	case !queued:
		return nil, ErrNotQueued
	case token == nil:
		return nil, ErrLeaseHeld
	}
	l := &Lease{Tenant: w.Tenant, SessionID: w.SessionID, Owner: w.Owner, Token: *token, Expires: fromNanos(*expires)}
	l.setVersion(version)
	return l, nil
}

// Dequeue implements Relay.
func (s *Postgres) Dequeue(ctx context.Context, w *Waiter) error {
	if _, err := s.pool.Exec(ctx, pgDequeue, w.ID, ChannelLease, s.payload(w.Tenant, w.SessionID, 0)); err != nil {
		return fmt.Errorf("leaving the lease's queue: %w", pgError(err))
	}
	return nil
}

// RenewWaiters implements Relay.
func (s *Postgres) RenewWaiters(ctx context.Context, ids []int64, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("renewing waiters: %w: ttl %v is not positive", ErrInvalid, ttl)
	}
	if _, err := s.pool.Exec(ctx, pgRenewWaiters, ids, ttl.Nanoseconds()); err != nil {
		return fmt.Errorf("renewing waiters: %w", pgError(err))
	}
	return nil
}

// SweepWaiters implements Relay.
func (s *Postgres) SweepWaiters(ctx context.Context) (int, error) {
	tag, err := s.pool.Exec(ctx, pgSweepWaiters)
	if err != nil {
		return 0, fmt.Errorf("sweeping waiters: %w", pgError(err))
	}
	return int(tag.RowsAffected()), nil
}
