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

// DecideApproval implements Store. The single writer makes the conditional
// update one atomic step: of two concurrent decisions, one wins.
func (s *SQLite) DecideApproval(ctx context.Context, tenant, id, state, decidedBy, reason string, at time.Time) (*Approval, error) {
	args, err := decideArgs(tenant, id, state, decidedBy, reason, at)
	if err != nil {
		return nil, fmt.Errorf("deciding approval: %w", err)
	}
	var a *Approval
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		a, err = scanApproval(tx.QueryRowContext(ctx, decideApprovalSQL, args...))
		if errors.Is(err, sql.ErrNoRows) {
			return undecidable(scanApproval(tx.QueryRowContext(ctx, getApprovalSQL, tenant, id)))
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("deciding approval: %w", err)
	}
	return a, nil
}

// ExpireApprovals implements Store. A reader checks first, so the sweep
// takes the writer only when something expired.
func (s *SQLite) ExpireApprovals(ctx context.Context, at time.Time) ([]Approval, error) {
	var one int
	switch err := s.r.QueryRowContext(ctx, anyExpiredSQL, nanos(at)).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return []Approval{}, nil
	case err != nil:
		return nil, fmt.Errorf("expiring approvals: %w", err)
	}
	var out []Approval
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, expireApprovalsSQL, nanos(at), nanos(at))
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = scanApprovals(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expiring approvals: %w", err)
	}
	return out, nil
}

// The PostgreSQL forms of the statements.
var (
	pgInsertApproval  = placeholders(insertApprovalSQL)
	pgGetApproval     = placeholders(getApprovalSQL)
	pgDecideApproval  = placeholders(decideApprovalSQL)
	pgExpireApprovals = placeholders(expireApprovalsSQL)
	pgAnyExpired      = placeholders(anyExpiredSQL)
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

// DecideApproval implements Store. The conditional update takes the row's
// lock: of two concurrent decisions, the second sees it decided.
func (s *Postgres) DecideApproval(ctx context.Context, tenant, id, state, decidedBy, reason string, at time.Time) (*Approval, error) {
	args, err := decideArgs(tenant, id, state, decidedBy, reason, at)
	if err != nil {
		return nil, fmt.Errorf("deciding approval: %w", err)
	}
	var a *Approval
	err = s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		a, err = scanApproval(tx.QueryRow(ctx, pgDecideApproval, args...))
		if errors.Is(err, pgx.ErrNoRows) {
			return undecidable(scanApproval(tx.QueryRow(ctx, pgGetApproval, tenant, id)))
		}
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("deciding approval: %w", err)
	}
	return a, nil
}

// ExpireApprovals implements Store. A read checks first, so the sweep
// writes only when something expired.
func (s *Postgres) ExpireApprovals(ctx context.Context, at time.Time) ([]Approval, error) {
	var one int
	switch err := s.pool.QueryRow(ctx, pgAnyExpired, nanos(at)).Scan(&one); {
	case errors.Is(err, pgx.ErrNoRows):
		return []Approval{}, nil
	case err != nil:
		return nil, fmt.Errorf("expiring approvals: %w", pgError(err))
	}
	var out []Approval
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, pgExpireApprovals, nanos(at), nanos(at))
		if err != nil {
			return err
		}
		defer rows.Close()
		out, err = scanApprovals(rows)
		return err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("expiring approvals: %w", err)
	}
	return out, nil
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
