package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// AcquireLease implements Store: the lease lives in this process, the one
// process of the file.
func (s *SQLite) AcquireLease(_ context.Context, tenant, sessionID, owner string, ttl time.Duration) (*Lease, error) {
	return s.leases.acquire(tenant, sessionID, owner, ttl)
}

// RenewLease implements Store.
func (s *SQLite) RenewLease(_ context.Context, l *Lease, ttl time.Duration) (LeaseState, error) {
	return s.leases.renew(l, ttl)
}

// ReleaseLease implements Store.
func (s *SQLite) ReleaseLease(_ context.Context, l *Lease) error {
	return s.leases.release(l)
}

// CancelLease implements Store.
func (s *SQLite) CancelLease(_ context.Context, tenant, sessionID string, token int64) (bool, error) {
	return s.leases.cancel(tenant, sessionID, token), nil
}

// ClaimSubmission implements Store. The single writer connection makes the
// select-and-update one atomic step, so two claimers never get the same row.
func (s *SQLite) ClaimSubmission(ctx context.Context, owner string, ttl time.Duration) (*Submission, error) {
	if err := claimArgs(owner, ttl); err != nil {
		return nil, fmt.Errorf("claiming submission: %w", err)
	}
	var sub *Submission
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		sub, err = scanSubmission(tx.StmtContext(ctx, s.q.claimSubmission).QueryRowContext(ctx,
			nanos(now()), owner, ttl.Nanoseconds()))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claiming submission: %w", err)
	}
	return sub, nil
}

// RenewSubmission implements Store.
func (s *SQLite) RenewSubmission(ctx context.Context, sub *Submission, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("renewing submission: %w: ttl %v is not positive", ErrInvalid, ttl)
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return fencedOne(tx.StmtContext(ctx, s.q.renewSubmission).ExecContext(ctx, nanos(now().Add(ttl)), sub.ID, sub.Attempts))
	})
	if err != nil {
		return fmt.Errorf("renewing submission: %w", err)
	}
	return nil
}

// FinishSubmission implements Store.
func (s *SQLite) FinishSubmission(ctx context.Context, id string, claim int, status string, result json.RawMessage) error {
	v, err := finishArgs(status, result)
	if err != nil {
		return fmt.Errorf("finishing submission: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, s.q.finishSubmission).ExecContext(ctx, status, v, nanos(now()), id, claim)
		if err != nil {
			return err
		}
		if affectedOne(res) == nil {
			return nil
		}
		var cur string
		err = tx.StmtContext(ctx, s.q.submissionStatus).QueryRowContext(ctx, id).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return finishRefusal(id, cur)
	})
	if err != nil {
		return fmt.Errorf("finishing submission: %w", err)
	}
	return nil
}

// setSubmissionRequestSQL replaces a running submission's request under
// its claim (? placeholders).
const setSubmissionRequestSQL = `UPDATE submissions SET request = ? WHERE id = ? AND status = 'running' AND attempts = ?`

// SetSubmissionRequest implements Store.
func (s *SQLite) SetSubmissionRequest(ctx context.Context, id string, claim int, request json.RawMessage) error {
	if !json.Valid(request) {
		return fmt.Errorf("setting submission request: %w: the request is not JSON", ErrInvalid)
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return fencedOne(tx.ExecContext(ctx, setSubmissionRequestSQL, string(request), id, claim))
	})
	if err != nil {
		return fmt.Errorf("setting submission request: %w", err)
	}
	return nil
}

// fencedOne is the outcome of a write made under a claim: its error, or
// ErrFenced when it changed no row (the claim is no longer held).
func fencedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	if affectedOne(res) != nil {
		return ErrFenced
	}
	return nil
}

// RequeueRunning implements Store: every running submission, since the
// file serves one process.
func (s *SQLite) RequeueRunning(ctx context.Context) (int, error) {
	n, err := s.update(ctx, s.q.requeue, nanos(now()))
	if err != nil {
		return 0, fmt.Errorf("requeueing submissions: %w", err)
	}
	return n, nil
}

// DropQueued implements Store.
func (s *SQLite) DropQueued(ctx context.Context, tenant, sessionID string) (int, error) {
	n, err := s.update(ctx, s.q.dropQueued, string(droppedResult), nanos(now()), tenant, sessionID)
	if err != nil {
		return 0, fmt.Errorf("dropping queued submissions: %w", err)
	}
	return n, nil
}

// update runs stmt, a writer statement, with args in a write and returns
// the rows it changed.
func (s *SQLite) update(ctx context.Context, stmt *sql.Stmt, args ...any) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
