package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The approval methods of both drivers: the same statements (approvals.go),
// run by SQLite's writer and readers, or by PostgreSQL's pool.

// CreateApprovals implements Store.
func (s *SQLite) CreateApprovals(ctx context.Context, as []Approval) error {
	args, err := approvalsArgs(as)
	if err != nil {
		return fmt.Errorf("creating approvals: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, a := range args {
			if _, err := tx.ExecContext(ctx, insertApprovalSQL, a...); err != nil {
				return uniqueConflict(err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("creating approvals: %w", err)
	}
	return nil
}

// GetApproval implements Store.
func (s *SQLite) GetApproval(ctx context.Context, tenant, id string) (*Approval, error) {
	a, err := scanApproval(s.r.QueryRowContext(ctx, getApprovalSQL, tenant, id))
	if err != nil {
		return nil, fmt.Errorf("reading approval: %w", notFound(err))
	}
	return a, nil
}

// ListApprovals implements Store.
func (s *SQLite) ListApprovals(ctx context.Context, tenant string, f ApprovalFilter) ([]Approval, error) {
	q, args := listApprovalsSQL(tenant, f)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	defer rows.Close()
	out, err := scanApprovals(rows)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", err)
	}
	return out, nil
}

// CountPendingApprovals implements Store.
func (s *SQLite) CountPendingApprovals(ctx context.Context) (map[string]int, error) {
	rows, err := s.r.QueryContext(ctx, countPendingSQL)
	if err != nil {
		return nil, fmt.Errorf("counting pending approvals: %w", err)
	}
	defer rows.Close()
	out, err := scanCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("counting pending approvals: %w", err)
	}
	return out, nil
}

// DecideApproval implements Store. The single writer makes the decision,
// the check of what its message has left pending and the resume's insert
// one atomic step: of two concurrent decisions, one wins, and of two
// decisions of one message's approvals, the second sees the first.
func (s *SQLite) DecideApproval(ctx context.Context, tenant, id string, d Decision) (*Approval, *Submission, error) {
	args, err := decideArgs(tenant, id, d)
	if err != nil {
		return nil, nil, fmt.Errorf("deciding approval: %w", err)
	}
	var (
		a   *Approval
		sub *Submission
	)
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		a, sub, err = decideIn(sqliteApprovalTx{ctx, s, tx}, tenant, id, args, d.Resume)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("deciding approval: %w", err)
	}
	return a, sub, nil
}

// ExpireApprovals implements Store. A reader checks first, so the sweep
// takes the writer only when something expired.
func (s *SQLite) ExpireApprovals(ctx context.Context, at time.Time, resume Resume) ([]Approval, []Submission, error) {
	var one int
	switch err := s.r.QueryRowContext(ctx, anyExpiredSQL, nanos(at)).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return []Approval{}, []Submission{}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("expiring approvals: %w", err)
	}
	var (
		out  []Approval
		subs []Submission
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		out, subs, err = expireIn(sqliteApprovalTx{ctx, s, tx}, nanos(at), resume)
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("expiring approvals: %w", err)
	}
	return out, subs, nil
}

// sqliteApprovalTx is an approvalTx of the SQLite writer.
type sqliteApprovalTx struct {
	ctx context.Context
	s   *SQLite
	tx  *sql.Tx
}

func (t sqliteApprovalTx) queryRow(q string, args ...any) rowScanner {
	return t.tx.QueryRowContext(t.ctx, q, args...)
}

func (t sqliteApprovalTx) queryApprovals(q string, args ...any) ([]Approval, error) {
	rows, err := t.tx.QueryContext(t.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanApprovals(rows)
}

func (sqliteApprovalTx) lockMessage(string, string, string) error { return nil }

func (sqliteApprovalTx) lockExpired(int64) error { return nil }

func (t sqliteApprovalTx) queueResume(sub *Submission) (*Submission, error) {
	id, key, err := submissionArgs(sub)
	if err != nil {
		return nil, err
	}
	pk, err := t.s.sessionPK(t.ctx, t.tx, sub.Tenant, sub.SessionID)
	if err != nil {
		return nil, err
	}
	out, _, err := t.s.queueSubmission(t.ctx, t.tx, pk, id, key, sub, QueueLimits{}, now())
	return out, err
}

// The PostgreSQL forms of the statements.
var (
	pgInsertApproval = placeholders(insertApprovalSQL)
	pgGetApproval    = placeholders(getApprovalSQL)
	pgAnyExpired     = placeholders(anyExpiredSQL)
)

// CreateApprovals implements Store.
func (s *Postgres) CreateApprovals(ctx context.Context, as []Approval) error {
	args, err := approvalsArgs(as)
	if err != nil {
		return fmt.Errorf("creating approvals: %w", err)
	}
	err = s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		for _, a := range args {
			if _, err := tx.Exec(ctx, pgInsertApproval, a...); err != nil {
				if isUniqueViolation(err) {
					return fmt.Errorf("%w: approval id is taken", ErrConflict)
				}
				return err
			}
		}
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("creating approvals: %w", err)
	}
	return nil
}

// GetApproval implements Store.
func (s *Postgres) GetApproval(ctx context.Context, tenant, id string) (*Approval, error) {
	a, err := scanApproval(s.pool.QueryRow(ctx, pgGetApproval, tenant, id))
	if err != nil {
		return nil, fmt.Errorf("reading approval: %w", notFound(pgError(err)))
	}
	return a, nil
}

// ListApprovals implements Store.
func (s *Postgres) ListApprovals(ctx context.Context, tenant string, f ApprovalFilter) ([]Approval, error) {
	q, args := listApprovalsSQL(tenant, f)
	rows, err := s.pool.Query(ctx, placeholders(q), args...)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", pgError(err))
	}
	defer rows.Close()
	out, err := scanApprovals(rows)
	if err != nil {
		return nil, fmt.Errorf("listing approvals: %w", pgError(err))
	}
	return out, nil
}

// CountPendingApprovals implements Store.
func (s *Postgres) CountPendingApprovals(ctx context.Context) (map[string]int, error) {
	rows, err := s.pool.Query(ctx, countPendingSQL)
	if err != nil {
		return nil, fmt.Errorf("counting pending approvals: %w", pgError(err))
	}
	defer rows.Close()
	out, err := scanCounts(rows)
	if err != nil {
		return nil, fmt.Errorf("counting pending approvals: %w", pgError(err))
	}
	return out, nil
}

// DecideApproval implements Store. The decision locks its message's
// approvals first (lockMessage): of two concurrent decisions of one
// approval, the second sees it decided; of two decisions of one message's
// approvals, the second sees the first's when it checks what is left
// pending, so the last one queues the resume.
func (s *Postgres) DecideApproval(ctx context.Context, tenant, id string, d Decision) (*Approval, *Submission, error) {
	args, err := decideArgs(tenant, id, d)
	if err != nil {
		return nil, nil, fmt.Errorf("deciding approval: %w", err)
	}
	var (
		a   *Approval
		sub *Submission
	)
	err = s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		a, sub, err = decideIn(pgApprovalTx{ctx, tx}, tenant, id, args, d.Resume)
		return err
	}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("deciding approval: %w", err)
	}
	return a, sub, nil
}

// ExpireApprovals implements Store. A read checks first, so the sweep
// writes only when something expired.
func (s *Postgres) ExpireApprovals(ctx context.Context, at time.Time, resume Resume) ([]Approval, []Submission, error) {
	var one int
	switch err := s.pool.QueryRow(ctx, pgAnyExpired, nanos(at)).Scan(&one); {
	case errors.Is(err, pgx.ErrNoRows):
		return []Approval{}, []Submission{}, nil
	case err != nil:
		return nil, nil, fmt.Errorf("expiring approvals: %w", pgError(err))
	}
	var (
		out  []Approval
		subs []Submission
	)
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		out, subs, err = expireIn(pgApprovalTx{ctx, tx}, nanos(at), resume)
		return err
	}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("expiring approvals: %w", err)
	}
	return out, subs, nil
}

// The locks of PostgreSQL's decisions, taken in one order: by tenant,
// session, message and id (see lockMessage).
const (
	pgLockMessage = `SELECT id FROM approvals WHERE tenant = $1 AND session_id = $2 AND message_id = $3
		ORDER BY id FOR UPDATE`
	pgLockExpired = `SELECT id FROM approvals WHERE (tenant, session_id, message_id) IN
		(SELECT tenant, session_id, message_id FROM approvals WHERE state = 'pending' AND expires_at <= $1)
		ORDER BY tenant, session_id, message_id, id FOR UPDATE`
)

// pgApprovalTx is an approvalTx of a PostgreSQL transaction.
type pgApprovalTx struct {
	ctx context.Context
	tx  pgx.Tx
}

func (t pgApprovalTx) queryRow(q string, args ...any) rowScanner {
	return t.tx.QueryRow(t.ctx, placeholders(q), args...)
}

func (t pgApprovalTx) queryApprovals(q string, args ...any) ([]Approval, error) {
	rows, err := t.tx.Query(t.ctx, placeholders(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanApprovals(rows)
}

func (t pgApprovalTx) lockMessage(tenant, sessionID, messageID string) error {
	_, err := t.tx.Exec(t.ctx, pgLockMessage, tenant, sessionID, messageID)
	return err
}

func (t pgApprovalTx) lockExpired(at int64) error {
	_, err := t.tx.Exec(t.ctx, pgLockExpired, at)
	return err
}

func (t pgApprovalTx) queueResume(sub *Submission) (*Submission, error) {
	id, key, err := submissionArgs(sub)
	if err != nil {
		return nil, err
	}
	var pk int64
	if err := t.tx.QueryRow(t.ctx, pgSessionPK, sub.Tenant, sub.SessionID).Scan(&pk); err != nil {
		return nil, notFound(err)
	}
	out, _, err := pgQueueSubmission(t.ctx, t.tx, pk, id, key, sub, QueueLimits{}, nanos(now()))
	return out, err
}

// scanCounts reads rows of (tenant, count) into a map.
func scanCounts(rows interface {
	rowScanner
	Next() bool
	Err() error
}) (map[string]int, error) {
	out := map[string]int{}
	for rows.Next() {
		var (
			tenant string
			n      int
		)
		if err := rows.Scan(&tenant, &n); err != nil {
			return nil, err
		}
		out[tenant] = n
	}
	return out, rows.Err()
}

// approvalsArgs checks every approval and returns their insert arguments.
func approvalsArgs(as []Approval) ([][]any, error) {
	out := make([][]any, len(as))
	for i := range as {
		args, err := approvalArgs(&as[i])
		if err != nil {
			return nil, err
		}
		out[i] = args
	}
	return out, nil
}

// undecidable is DecideApproval's error when its update matched no row:
// ErrNotFound when there is no such approval, else ErrConflict (decided
// already, or expired).
func undecidable(a *Approval, err error) error {
	if err != nil {
		return notFound(err)
	}
	state := a.State
	if state == ApprovalPending {
		state = "expired"
	}
	return fmt.Errorf("%w: approval %q is already %s", ErrConflict, a.ID, state)
}

// notFound maps both drivers' "no rows" to ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// uniqueConflict maps SQLite's constraint failure (a taken id) to
// ErrConflict.
func uniqueConflict(err error) error {
	if isConstraint(err) {
		return fmt.Errorf("%w: approval id is taken", ErrConflict)
	}
	return err
}
