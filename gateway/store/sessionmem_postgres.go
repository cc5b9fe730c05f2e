package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

var _ SessionMemory = (*Postgres)(nil)

// SessionState implements SessionMemory.
func (s *Postgres) SessionState(ctx context.Context, tenant, sessionID string) (*SessionState, error) {
	st := &SessionState{Blocks: map[string]string{}}
	rows, err := s.pool.Query(ctx, `SELECT name, content FROM context_blocks WHERE tenant = $1 AND session_id = $2`, tenant, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading session state: %w", pgError(err))
	}
	for rows.Next() {
		var name, content string
		if err := rows.Scan(&name, &content); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading session state: %w", err)
		}
		st.Blocks[name] = content
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading session state: %w", pgError(err))
	}
	c, err := scanCompaction(s.pool.QueryRow(ctx, `SELECT `+compactionColumns+` FROM compactions
		WHERE tenant = $1 AND session_id = $2 ORDER BY seq DESC LIMIT 1`, tenant, sessionID))
	switch {
	case err == nil:
		st.Compaction = &c
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("reading session state: %w", pgError(err))
	}
	err = s.pool.QueryRow(ctx, `SELECT last_input_tokens FROM session_usage WHERE tenant = $1 AND session_id = $2`,
		tenant, sessionID).Scan(&st.LastInputTokens)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("reading session state: %w", pgError(err))
	}
	return st, nil
}

// PutContextBlock implements SessionMemory.
func (s *Postgres) PutContextBlock(ctx context.Context, tenant, sessionID, name, content string) error {
	if err := blockArgs(tenant, sessionID, name, content); err != nil {
		return fmt.Errorf("storing context block: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storing context block: %w", err)
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO context_blocks (tenant, session_id, name, content, updated_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, session_id, name) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at`,
		tenant, sessionID, name, content, nanos(now()))
	if err != nil {
		return fmt.Errorf("storing context block: %w", pgError(err))
	}
	return nil
}

// AddCompaction implements SessionMemory.
func (s *Postgres) AddCompaction(ctx context.Context, c *Compaction) error {
	at, err := compactionArgs(c)
	if err != nil {
		return fmt.Errorf("storing compaction: %w", err)
	}
	err = s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO compactions (`+compactionColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			c.Tenant, c.SessionID, []byte(c.ThroughMessageID), c.MessageCount, c.Summary, c.Reason, c.InputTokens, c.Model, nanos(at)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM session_usage WHERE tenant = $1 AND session_id = $2`, c.Tenant, c.SessionID)
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("storing compaction: %w", err)
	}
	return nil
}

// Compactions implements SessionMemory.
func (s *Postgres) Compactions(ctx context.Context, tenant, sessionID string) ([]Compaction, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+compactionColumns+` FROM compactions WHERE tenant = $1 AND session_id = $2 ORDER BY seq`, tenant, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading compactions: %w", pgError(err))
	}
	return collectCompactions(rows.Next, rows.Err, func() error { rows.Close(); return nil }, rows)
}

// SetLastInputTokens implements SessionMemory.
func (s *Postgres) SetLastInputTokens(ctx context.Context, tenant, sessionID string, tokens int) error {
	if err := nonEmpty("tenant", tenant, "session id", sessionID); err != nil {
		return fmt.Errorf("recording input tokens: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("recording input tokens: %w", err)
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO session_usage (tenant, session_id, last_input_tokens, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, session_id) DO UPDATE SET last_input_tokens = excluded.last_input_tokens, updated_at = excluded.updated_at`,
		tenant, sessionID, tokens, nanos(now()))
	if err != nil {
		return fmt.Errorf("recording input tokens: %w", pgError(err))
	}
	return nil
}

// pgSearchMessages ranks a session's messages by their text parts against
// a tsquery of the search terms; $3 is the terms joined by " | ".
const pgSearchMessages = `SELECT m.message_id, m.role,
		ts_headline('simple', t.text, to_tsquery('simple', $3), 'StartSel=[, StopSel=], MaxWords=16, MinWords=4')
	FROM sessions s JOIN messages m ON m.session_pk = s.pk,
	LATERAL (SELECT string_agg(p->>'text', ' ') AS text FROM jsonb_array_elements(m.body::jsonb->'parts') AS p
		WHERE p->>'type' = 'text') AS t
	WHERE s.tenant = $1 AND s.id = $2 AND t.text IS NOT NULL
		AND to_tsvector('simple', t.text) @@ to_tsquery('simple', $3)
	ORDER BY ts_rank(to_tsvector('simple', t.text), to_tsquery('simple', $3)) DESC, m.position DESC LIMIT $4`

// SearchMessages implements SessionMemory: PostgreSQL searches at query
// time (migration 0005).
func (s *Postgres) SearchMessages(ctx context.Context, tenant, sessionID, query string, limit int) ([]MessageHit, error) {
	terms, err := searchArgs(tenant, sessionID, query, limit)
	if err != nil {
		return nil, fmt.Errorf("searching messages: %w", err)
	}
	rows, err := s.pool.Query(ctx, pgSearchMessages, tenant, sessionID, strings.Join(terms, " | "), limit)
	if err != nil {
		return nil, fmt.Errorf("searching messages: %w", pgError(err))
	}
	defer rows.Close()
	hits := []MessageHit{}
	for rows.Next() {
		var (
			h  MessageHit
			id []byte
		)
		if err := rows.Scan(&id, &h.Role, &h.Snippet); err != nil {
			return nil, fmt.Errorf("searching messages: %w", err)
		}
		h.MessageID = string(id)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("searching messages: %w", pgError(err))
	}
	return hits, nil
}
