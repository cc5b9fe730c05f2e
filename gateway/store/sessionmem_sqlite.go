package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

var _ SessionMemory = (*SQLite)(nil)

// SessionState implements SessionMemory.
func (s *SQLite) SessionState(ctx context.Context, tenant, sessionID string) (*SessionState, error) {
	st := &SessionState{Blocks: map[string]string{}}
	rows, err := s.r.QueryContext(ctx, `SELECT name, content FROM context_blocks WHERE tenant = ? AND session_id = ?`, tenant, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading session state: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, content string
		if err := rows.Scan(&name, &content); err != nil {
			return nil, fmt.Errorf("reading session state: %w", err)
		}
		st.Blocks[name] = content
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading session state: %w", err)
	}
	c, err := scanCompaction(s.r.QueryRowContext(ctx, `SELECT `+compactionColumns+` FROM compactions
		WHERE tenant = ? AND session_id = ? ORDER BY seq DESC LIMIT 1`, tenant, sessionID))
	switch {
	case err == nil:
		st.Compaction = &c
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("reading session state: %w", err)
	}
	err = s.r.QueryRowContext(ctx, `SELECT last_input_tokens FROM session_usage WHERE tenant = ? AND session_id = ?`,
		tenant, sessionID).Scan(&st.LastInputTokens)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("reading session state: %w", err)
	}
	return st, nil
}

// PutContextBlock implements SessionMemory.
func (s *SQLite) PutContextBlock(ctx context.Context, tenant, sessionID, name, content string) error {
	if err := blockArgs(tenant, sessionID, name, content); err != nil {
		return fmt.Errorf("storing context block: %w", err)
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO context_blocks (tenant, session_id, name, content, updated_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (tenant, session_id, name) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at`,
			tenant, sessionID, name, content, nanos(now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("storing context block: %w", err)
	}
	return nil
}

// AddCompaction implements SessionMemory.
func (s *SQLite) AddCompaction(ctx context.Context, c *Compaction) error {
	at, err := compactionArgs(c)
	if err != nil {
		return fmt.Errorf("storing compaction: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO compactions (`+compactionColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.Tenant, c.SessionID, c.ThroughMessageID, c.MessageCount, c.Summary, c.Reason, c.InputTokens, c.Model, nanos(at)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM session_usage WHERE tenant = ? AND session_id = ?`, c.Tenant, c.SessionID)
		return err
	})
	if err != nil {
		return fmt.Errorf("storing compaction: %w", err)
	}
	return nil
}

// Compactions implements SessionMemory.
func (s *SQLite) Compactions(ctx context.Context, tenant, sessionID string) ([]Compaction, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+compactionColumns+` FROM compactions WHERE tenant = ? AND session_id = ? ORDER BY seq`, tenant, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading compactions: %w", err)
	}
	return collectCompactions(rows.Next, rows.Err, rows.Close, rows)
}

// SetLastInputTokens implements SessionMemory.
func (s *SQLite) SetLastInputTokens(ctx context.Context, tenant, sessionID string, tokens int) error {
	if err := nonEmpty("tenant", tenant, "session id", sessionID); err != nil {
		return fmt.Errorf("recording input tokens: %w", err)
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO session_usage (tenant, session_id, last_input_tokens, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (tenant, session_id) DO UPDATE SET last_input_tokens = excluded.last_input_tokens, updated_at = excluded.updated_at`,
			tenant, sessionID, tokens, nanos(now()))
		return err
	})
	if err != nil {
		return fmt.Errorf("recording input tokens: %w", err)
	}
	return nil
}

// SearchMessages implements SessionMemory with the FTS5 index of
// migration 0005.
func (s *SQLite) SearchMessages(ctx context.Context, tenant, sessionID, query string, limit int) ([]MessageHit, error) {
	terms, err := searchArgs(tenant, sessionID, query, limit)
	if err != nil {
		return nil, fmt.Errorf("searching messages: %w", err)
	}
	quoted := make([]string, len(terms))
	for i, t := range terms {
		quoted[i] = `"` + t + `"`
	}
	rows, err := s.r.QueryContext(ctx, `SELECT message_id, role, snippet(message_search, 0, '[', ']', '…', 16) FROM message_search
		WHERE message_search MATCH ? AND session_pk = (SELECT pk FROM sessions WHERE tenant = ? AND id = ?)
		ORDER BY rank, rowid DESC LIMIT ?`, strings.Join(quoted, " OR "), tenant, sessionID, limit)
	if err != nil {
		return nil, fmt.Errorf("searching messages: %w", err)
	}
	defer rows.Close()
	hits := []MessageHit{}
	for rows.Next() {
		var h MessageHit
		if err := rows.Scan(&h.MessageID, &h.Role, &h.Snippet); err != nil {
			return nil, fmt.Errorf("searching messages: %w", err)
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("searching messages: %w", err)
	}
	return hits, nil
}
