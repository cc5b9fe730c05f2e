package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements that coordinate replicas on one PostgreSQL database:
// session leases, submission claims and queue limits.
//
// Lease and claim times are the database server's clock (pgNow), not the
// replicas': replicas whose clocks disagree still agree on when a lease
// expires.
const (
	pgNow = `(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000)::BIGINT`

	// A free or expired lease is taken with the next token; a live one,
	// or a live waiter of the session (pgAcquireQueued's queue: a newcomer
	// queues behind it), makes the statement return no row. The row is
	// locked for the statement, so it waits for a fenced write in progress
	// (pgFence's FOR SHARE) to commit. It also returns the session's
	// version (NULL without a session) for the transcript read that
	// follows under the lease: session_version reads it with a snapshot
	// taken once the row is taken, so a write that committed while the
	// statement waited for it is counted.
	pgAcquireLease = `INSERT INTO session_leases AS l (tenant, session_id, owner, token, expires_at)
		VALUES ($1, $2, $3, 1, ` + pgNow + ` + $4)
		ON CONFLICT (tenant, session_id) DO UPDATE
		SET owner = excluded.owner, token = l.token + 1, expires_at = excluded.expires_at, cancelled = false, followed = false
		WHERE l.expires_at <= ` + pgNow + ` AND NOT EXISTS (SELECT 1 FROM session_waiters w
			WHERE w.tenant = $1 AND w.session_id = $2 AND w.expires_at > ` + pgNow + `)
		RETURNING token, expires_at, session_version($1, $2)`
	// pgAsyncCommit, true in a statement's WHERE, commits the statement's
	// transaction without waiting for its WAL flush (synchronous_commit off
	// for this transaction only). For writes a database crash may lose
	// without harm: a lost renewal or release makes the lease end at its
	// old expiry (fencing still holds: acquisition, which moves the token,
	// commits synchronously), lost relay batches only cut a stream whose
	// turn the crash ended anyway.
	pgAsyncCommit = `(SELECT set_config('synchronous_commit', 'off', true)) = 'off'`
	// A released lease (expires_at 0) stays released: the renewal
	// returns its 0.
	pgRenewLease = `UPDATE session_leases SET expires_at = CASE WHEN expires_at = 0 THEN 0 ELSE ` + pgNow + ` + $4 END
		WHERE tenant = $1 AND session_id = $2 AND token = $3 AND ` + pgAsyncCommit + ` RETURNING expires_at, cancelled, followed`
	// A released lease keeps its row and token: the next acquisition
	// counts on from it. It wakes the session's waiters, if any.
	pgReleaseLease = `WITH released AS (
			UPDATE session_leases SET expires_at = 0
			WHERE tenant = $1 AND session_id = $2 AND token = $3 AND ` + pgAsyncCommit + ` RETURNING 1)
		SELECT pg_notify($4, $5) FROM released WHERE ` + pgWaiting
	// pgWaiting, true in a statement, reports live waiters of the session
	// $1, $2, seen once the statement holds the lease row (migration 0009's
	// session_waiting).
	pgWaiting = `session_waiting($1, $2)`
	// pgReleaseUnfollowed releases the lease, as pgReleaseLease does,
	// unless a reader follows its stream (Relay.ReleaseUnfollowed); its one
	// row reports whether it did.
	pgReleaseUnfollowed = `WITH released AS (
			UPDATE session_leases SET expires_at = 0
			WHERE tenant = $1 AND session_id = $2 AND token = $3 AND NOT followed AND ` + pgAsyncCommit + ` RETURNING 1)
		SELECT COUNT(*) FROM released LEFT JOIN LATERAL (SELECT pg_notify($4, $5)::text WHERE ` + pgWaiting + `) n ON true`
	pgCancelLease = `UPDATE session_leases SET cancelled = true
		WHERE tenant = $1 AND session_id = $2 AND ($3::bigint = 0 OR token = $3) AND expires_at > ` + pgNow + ` RETURNING token`
	// pgFence holds the lease row (shared) until the write's transaction
	// ends: a new acquisition, which changes the token, waits for the write
	// to commit, and a write after it finds the new token and raises TG001
	// (ErrFenced). Migration 0009's turngate_fence, which the functions of
	// a turn's writes call too.
	pgFence = `SELECT turngate_fence($1, $2, $3)`

	// The oldest queued submission, or running one whose claim expired,
	// whose session has no earlier one queued or running. SKIP LOCKED
	// passes over a row another claimer has locked; the submissions after
	// it in its session wait, since it is still queued in this statement's
	// snapshot.
	pgClaimSubmission = `WITH next AS (
			SELECT q.seq FROM submissions q
			WHERE q.status IN ('queued', 'running') AND (q.status = 'queued' OR q.lease_until <= ` + pgNow + `)
			AND NOT EXISTS (
				SELECT 1 FROM submissions e
				WHERE e.session_pk = q.session_pk AND e.seq < q.seq AND e.status IN ('queued', 'running'))
			ORDER BY q.seq LIMIT 1
			FOR UPDATE SKIP LOCKED)
		UPDATE submissions s SET status = 'running', attempts = s.attempts + 1, updated_at = $1,
			claimed_by = $2, lease_until = ` + pgNow + ` + $3
		FROM next WHERE s.seq = next.seq
		RETURNING ` + submissionColumns
	pgRenewSubmission = `UPDATE submissions SET lease_until = ` + pgNow + ` + $3
		WHERE id = $1 AND status = 'running' AND attempts = $2`
	// claim 0 finishes a queued submission; any other, the running one of
	// that claim.
	pgFinishSubmission = `UPDATE submissions SET status = $1, result = $2, updated_at = $3, lease_until = NULL
		WHERE id = $4 AND ((status = 'queued' AND $5 = 0) OR (status = 'running' AND attempts = $5))`
	pgSubmissionStatus = `SELECT status FROM submissions WHERE id = $1`
	pgRequeue          = `UPDATE submissions SET status = 'queued', updated_at = $1, claimed_by = NULL, lease_until = NULL
		WHERE status = 'running' AND lease_until <= ` + pgNow
	pgDropQueued = `UPDATE submissions SET status = 'aborted', result = $1, updated_at = $2
		WHERE tenant = $3 AND session_id = $4 AND status = 'queued'`

	// pgQueueLock serializes the submissions of a tenant while it counts
	// its queue, across replicas.
	pgQueueLock  = `SELECT pg_advisory_xact_lock(hashtext('turngate.queue'), hashtext($1))`
	pgCountQueue = `SELECT COUNT(*) FILTER (WHERE session_pk = $2), COUNT(*)
		FROM submissions WHERE tenant = $1 AND status = 'queued'`
)

// droppedResult is the result DropQueued stores.
var droppedResult = json.RawMessage(`{"error":"dropped"}`)

// readVersion reads the stored version of the tenant's session.
func (s *Postgres) readVersion(ctx context.Context, tenant, sessionID string) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, pgSessionVersion, tenant, sessionID).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrNotFound
	}
	return v, pgError(err)
}

// pgCheckFence fails with ErrFenced unless the lease ctx carries for the
// tenant's session (see WithLease), if any, is the session's current one;
// it then holds the lease row until tx ends.
func pgCheckFence(ctx context.Context, tx pgx.Tx, tenant, sessionID string) error {
	l := fenceOf(ctx, tenant, sessionID)
	if l == nil {
		return nil
	}
	_, err := tx.Exec(ctx, pgFence, tenant, sessionID, l.Token)
	return pgError(err)
}

// AcquireLease implements Store.
func (s *Postgres) AcquireLease(ctx context.Context, tenant, sessionID, owner string, ttl time.Duration) (*Lease, error) {
	if err := leaseArgs(tenant, sessionID, owner, ttl); err != nil {
		return nil, fmt.Errorf("acquiring lease: %w", err)
	}
	l := &Lease{Tenant: tenant, SessionID: sessionID, Owner: owner}
	var (
		expires int64
		version *int64
	)
	err := s.pool.QueryRow(ctx, pgAcquireLease, tenant, sessionID, owner, ttl.Nanoseconds()).Scan(&l.Token, &expires, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrLeaseHeld
	}
	if err != nil {
		return nil, fmt.Errorf("acquiring lease: %w", pgError(err))
	}
	l.Expires = fromNanos(expires)
	l.setVersion(version)
	return l, nil
}

// RenewLease implements Store.
func (s *Postgres) RenewLease(ctx context.Context, l *Lease, ttl time.Duration) (LeaseState, error) {
	if ttl <= 0 {
		return LeaseState{}, fmt.Errorf("renewing lease: %w: ttl %v is not positive", ErrInvalid, ttl)
	}
	var (
		expires int64
		st      LeaseState
	)
	err := s.pool.QueryRow(ctx, pgRenewLease, l.Tenant, l.SessionID, l.Token, ttl.Nanoseconds()).Scan(&expires, &st.Cancelled, &st.Followed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return LeaseState{}, fmt.Errorf("renewing lease: %w", ErrFenced)
	case err != nil:
		return LeaseState{}, fmt.Errorf("renewing lease: %w", pgError(err))
	case expires == 0:
		return LeaseState{}, fmt.Errorf("renewing lease: %w", ErrLeaseReleased)
	}
	l.Expires = fromNanos(expires)
	return st, nil
}

// ReleaseLease implements Store.
func (s *Postgres) ReleaseLease(ctx context.Context, l *Lease) error {
	_, err := s.pool.Exec(ctx, pgReleaseLease, l.Tenant, l.SessionID, l.Token, ChannelLease, s.payload(l.Tenant, l.SessionID, l.Token))
	if err != nil {
		return fmt.Errorf("releasing lease: %w", pgError(err))
	}
	return nil
}

// CancelLease implements Store. The flag reaches the holder at its next
// renewal; a replica that listens for notifications (see Postgres.Listen)
// hears it at once on the cancel channel.
func (s *Postgres) CancelLease(ctx context.Context, tenant, sessionID string, token int64) (bool, error) {
	var cancelled bool
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		var held int64 // the cancelled holding's token
		err := tx.QueryRow(ctx, pgCancelLease, tenant, sessionID, token).Scan(&held)
		if errors.Is(err, pgx.ErrNoRows) {
			cancelled = false
			return nil
		}
		if err != nil {
			return err
		}
		cancelled = true
		return s.notify(ctx, tx, ChannelCancel, tenant, sessionID, held)
	}, nil)
	if err != nil {
		return false, fmt.Errorf("cancelling turn: %w", err)
	}
	return cancelled, nil
}

// pgCheckQueue returns the submission of key when there is one (a repeat is
// answered whatever the queue), else fails with a *QueueFullError when the
// tenant's session pk or the tenant has limits' queued submissions already;
// it holds the tenant's queue lock until tx ends.
func pgCheckQueue(ctx context.Context, tx pgx.Tx, tenant string, pk int64, key any, limits QueueLimits) (*Submission, error) {
	if _, err := tx.Exec(ctx, pgQueueLock, tenant); err != nil {
		return nil, err
	}
	if key != nil {
		sub, err := scanSubmission(tx.QueryRow(ctx, pgSubmissionByKey, pk, key))
		if !errors.Is(err, ErrNotFound) {
			return sub, err
		}
	}
	var session, all int
	if err := tx.QueryRow(ctx, pgCountQueue, tenant, pk).Scan(&session, &all); err != nil {
		return nil, err
	}
	return nil, queueFull(session, all, limits)
}

// queueFull returns the *QueueFullError of a session with session queued
// submissions in a tenant with all, nil when limits allow one more.
func queueFull(session, all int, limits QueueLimits) error {
	switch {
	case limits.PerSession > 0 && session >= limits.PerSession:
		return &QueueFullError{Scope: "session", Limit: limits.PerSession}
	case limits.PerTenant > 0 && all >= limits.PerTenant:
		return &QueueFullError{Scope: "tenant", Limit: limits.PerTenant}
	}
	return nil
}

// ClaimSubmission implements Store. FOR UPDATE SKIP LOCKED makes concurrent
// claimers, in this process or another, take different submissions.
func (s *Postgres) ClaimSubmission(ctx context.Context, owner string, ttl time.Duration) (*Submission, error) {
	if err := claimArgs(owner, ttl); err != nil {
		return nil, fmt.Errorf("claiming submission: %w", err)
	}
	var sub *Submission
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		sub, err = scanSubmission(tx.QueryRow(ctx, pgClaimSubmission, nanos(now()), owner, ttl.Nanoseconds()))
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("claiming submission: %w", err)
	}
	return sub, nil
}

// RenewSubmission implements Store.
func (s *Postgres) RenewSubmission(ctx context.Context, sub *Submission, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("renewing submission: %w: ttl %v is not positive", ErrInvalid, ttl)
	}
	tag, err := s.pool.Exec(ctx, pgRenewSubmission, sub.ID, sub.Attempts, ttl.Nanoseconds())
	if err != nil {
		return fmt.Errorf("renewing submission: %w", pgError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("renewing submission: %w", ErrFenced)
	}
	return nil
}

// FinishSubmission implements Store.
func (s *Postgres) FinishSubmission(ctx context.Context, id string, claim int, status string, result json.RawMessage) error {
	v, err := finishArgs(status, result)
	if err != nil {
		return fmt.Errorf("finishing submission: %w", err)
	}
	err = s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, pgFinishSubmission, status, v, nanos(now()), id, claim)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		// Finished already, missing, or another claim's.
		var cur string
		err = tx.QueryRow(ctx, pgSubmissionStatus, id).Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return finishRefusal(id, cur)
	}, nil)
	if err != nil {
		return fmt.Errorf("finishing submission: %w", err)
	}
	return nil
}

// SetSubmissionRequest implements Store.
func (s *Postgres) SetSubmissionRequest(ctx context.Context, id string, claim int, request json.RawMessage) error {
	if !json.Valid(request) {
		return fmt.Errorf("setting submission request: %w: the request is not JSON", ErrInvalid)
	}
	tag, err := s.pool.Exec(ctx, placeholders(setSubmissionRequestSQL), string(request), id, claim)
	if err != nil {
		return fmt.Errorf("setting submission request: %w", pgError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("setting submission request: %w", ErrFenced)
	}
	return nil
}

// finishRefusal is the error of finishing submission id, whose status is
// cur, under a claim that is not its own.
func finishRefusal(id, cur string) error {
	if finalStatus(cur) {
		return fmt.Errorf("%w: submission %q is already %s", ErrConflict, id, cur)
	}
	return fmt.Errorf("%w: submission %q is %s under another claim", ErrFenced, id, cur)
}

// RequeueRunning implements Store: the running submissions whose claim has
// expired.
func (s *Postgres) RequeueRunning(ctx context.Context) (int, error) {
	var n int64
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, pgRequeue, nanos(now()))
		n = tag.RowsAffected()
		return err
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("requeueing submissions: %w", err)
	}
	return int(n), nil
}

// DropQueued implements Store.
func (s *Postgres) DropQueued(ctx context.Context, tenant, sessionID string) (int, error) {
	var n int64
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, pgDropQueued, string(droppedResult), nanos(now()), tenant, sessionID)
		n = tag.RowsAffected()
		return err
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("dropping queued submissions: %w", err)
	}
	return int(n), nil
}

// claimArgs checks the arguments of ClaimSubmission.
func claimArgs(owner string, ttl time.Duration) error {
	if owner == "" {
		return fmt.Errorf("%w: empty owner", ErrInvalid)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: claim ttl %v is not positive", ErrInvalid, ttl)
	}
	return nil
}
