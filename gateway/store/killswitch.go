package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// KillSwitches keeps the operators' kill switches (gateway/killswitch gives
// them their meaning and checks them before they are stored). Both drivers
// implement it with the same statements.
type KillSwitches interface {
	// PutKillSwitch stores k, in force from then on; ErrConflict when its
	// id is taken. It deletes the switches that expired before k was
	// created (k.CreatedAt, the caller's clock) in the same transaction,
	// so the table holds little more than the switches in force. On PostgreSQL the same transaction notifies
	// ChannelKillSwitch, so every replica reads the switches again.
	PutKillSwitch(ctx context.Context, k *KillSwitch) error
	// KillSwitches returns the switches in force at at (not expired),
	// oldest first.
	KillSwitches(ctx context.Context, at time.Time) ([]KillSwitch, error)
	// LiftKillSwitch deletes the switch id and returns it; ErrNotFound
	// when there is none. It notifies ChannelKillSwitch as PutKillSwitch
	// does.
	LiftKillSwitch(ctx context.Context, id string) (*KillSwitch, error)
}

// Kill switch blocks: what a switch stops.
const (
	// KillTools stops tool calls: those of the switch's Tools, or all.
	KillTools = "tools"
	// KillTurns stops every turn before its model is called.
	KillTurns = "turns"
)

// KillSwitch is one stored kill switch.
type KillSwitch struct {
	ID string `json:"id"`
	// Block is KillTools or KillTurns.
	Block string `json:"block"`
	// Tools are the names and patterns of the tools a KillTools switch
	// stops; empty: every tool.
	Tools []string `json:"tools"`
	// Tenant and Agent are its scope; empty: every tenant, every agent.
	Tenant string `json:"tenant,omitempty"`
	Agent  string `json:"agent,omitempty"`
	// Reason is the operator's reason, and CreatedBy who set it.
	Reason    string    `json:"reason"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt, when not zero, lifts the switch by itself.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
}

// InForce reports whether k is in force at at: not expired.
func (k *KillSwitch) InForce(at time.Time) bool {
	return k.ExpiresAt.IsZero() || at.Before(k.ExpiresAt)
}

// ChannelKillSwitch is notified when a kill switch is set or lifted.
const ChannelKillSwitch = "turngate_killswitch"

const (
	killSwitchColumns   = `id, block, tools, tenant, agent, reason, created_by, created_at, expires_at`
	insertKillSwitchSQL = `INSERT INTO kill_switches (` + killSwitchColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	pruneKillSwitchSQL  = `DELETE FROM kill_switches WHERE expires_at <> 0 AND expires_at <= ?`
	listKillSwitchSQL   = `SELECT ` + killSwitchColumns + ` FROM kill_switches
		WHERE expires_at = 0 OR expires_at > ? ORDER BY created_at, id`
	liftKillSwitchSQL = `DELETE FROM kill_switches WHERE id = ? RETURNING ` + killSwitchColumns
)

// killSwitchArgs checks k and returns the arguments of insertKillSwitchSQL.
func killSwitchArgs(k *KillSwitch) ([]any, error) {
	if k.ID == "" || (k.Block != KillTools && k.Block != KillTurns) || k.CreatedAt.IsZero() {
		return nil, fmt.Errorf("%w: a kill switch needs an id, a block of %q or %q and a creation time", ErrInvalid, KillTools, KillTurns)
	}
	for name, s := range map[string]string{"id": k.ID, "tenant": k.Tenant, "agent": k.Agent, "reason": k.Reason, "createdBy": k.CreatedBy} {
		if err := storableText(name, s); err != nil {
			return nil, err
		}
	}
	tools := k.Tools
	if tools == nil {
		tools = []string{}
	}
	for _, t := range tools {
		if err := storableText("tools", t); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(tools)
	if err != nil {
		return nil, fmt.Errorf("%w: tools: %v", ErrInvalid, err)
	}
	return []any{k.ID, k.Block, string(raw), k.Tenant, k.Agent, k.Reason, k.CreatedBy, nanos(k.CreatedAt), nanos(k.ExpiresAt)}, nil
}

// scanKillSwitch reads one row of killSwitchColumns.
func scanKillSwitch(row interface{ Scan(...any) error }) (*KillSwitch, error) {
	var (
		k                  KillSwitch
		tools              string
		created, expiresAt int64
	)
	if err := row.Scan(&k.ID, &k.Block, &tools, &k.Tenant, &k.Agent, &k.Reason, &k.CreatedBy, &created, &expiresAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(tools), &k.Tools); err != nil {
		return nil, fmt.Errorf("kill switch %s: stored tools: %w", k.ID, err)
	}
	k.CreatedAt, k.ExpiresAt = fromNanos(created), fromNanos(expiresAt)
	return &k, nil
}

// PutKillSwitch implements KillSwitches.
func (s *SQLite) PutKillSwitch(ctx context.Context, k *KillSwitch) error {
	args, err := killSwitchArgs(k)
	if err != nil {
		return fmt.Errorf("storing kill switch: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, pruneKillSwitchSQL, nanos(k.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, insertKillSwitchSQL, args...)
		if isConstraint(err) {
			return fmt.Errorf("%w: kill switch id is taken", ErrConflict)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("storing kill switch: %w", err)
	}
	return nil
}

// KillSwitches implements KillSwitches.
func (s *SQLite) KillSwitches(ctx context.Context, at time.Time) ([]KillSwitch, error) {
	rows, err := s.r.QueryContext(ctx, listKillSwitchSQL, nanos(at))
	if err != nil {
		return nil, fmt.Errorf("reading kill switches: %w", err)
	}
	defer rows.Close()
	return collectKillSwitches(rows.Next, rows, rows.Err)
}

// LiftKillSwitch implements KillSwitches.
func (s *SQLite) LiftKillSwitch(ctx context.Context, id string) (*KillSwitch, error) {
	var k *KillSwitch
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		k, err = scanKillSwitch(tx.QueryRowContext(ctx, liftKillSwitchSQL, id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lifting kill switch: %w", notFound(err))
	}
	return k, nil
}

// The PostgreSQL forms of the statements.
var (
	pgInsertKillSwitch = placeholders(insertKillSwitchSQL)
	pgPruneKillSwitch  = placeholders(pruneKillSwitchSQL)
	pgListKillSwitch   = placeholders(listKillSwitchSQL)
	pgLiftKillSwitch   = placeholders(liftKillSwitchSQL)
)

// PutKillSwitch implements KillSwitches.
func (s *Postgres) PutKillSwitch(ctx context.Context, k *KillSwitch) error {
	args, err := killSwitchArgs(k)
	if err != nil {
		return fmt.Errorf("storing kill switch: %w", err)
	}
	err = s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, pgPruneKillSwitch, nanos(k.CreatedAt)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, pgInsertKillSwitch, args...); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("%w: kill switch id is taken", ErrConflict)
			}
			return err
		}
		return s.notify(ctx, tx, ChannelKillSwitch, "", "", 0)
	}, nil)
	if err != nil {
		return fmt.Errorf("storing kill switch: %w", err)
	}
	return nil
}

// KillSwitches implements KillSwitches.
func (s *Postgres) KillSwitches(ctx context.Context, at time.Time) ([]KillSwitch, error) {
	rows, err := s.pool.Query(ctx, pgListKillSwitch, nanos(at))
	if err != nil {
		return nil, fmt.Errorf("reading kill switches: %w", pgError(err))
	}
	defer rows.Close()
	return collectKillSwitches(rows.Next, rows, rows.Err)
}

// LiftKillSwitch implements KillSwitches.
func (s *Postgres) LiftKillSwitch(ctx context.Context, id string) (*KillSwitch, error) {
	var k *KillSwitch
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if k, err = scanKillSwitch(tx.QueryRow(ctx, pgLiftKillSwitch, id)); err != nil {
			return notFound(err)
		}
		return s.notify(ctx, tx, ChannelKillSwitch, "", "", 0)
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("lifting kill switch: %w", pgError(err))
	}
	return k, nil
}

// collectKillSwitches scans the rows of a kill switch query, whichever
// driver's.
func collectKillSwitches(next func() bool, row interface{ Scan(...any) error }, rowsErr func() error) ([]KillSwitch, error) {
	out := []KillSwitch{}
	for next() {
		k, err := scanKillSwitch(row)
		if err != nil {
			return nil, fmt.Errorf("reading kill switches: %w", err)
		}
		out = append(out, *k)
	}
	if err := rowsErr(); err != nil {
		return nil, fmt.Errorf("reading kill switches: %w", err)
	}
	return out, nil
}
