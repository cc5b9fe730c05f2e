package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SessionRecords lists, exports and erases whole sessions: what a
// compliance team asks of the store (gateway/erasure gives it its HTTP
// shape and its audit tombstone). Both drivers implement it with the same
// statements.
type SessionRecords interface {
	// ListSessions returns up to limit of the tenant's sessions of agent
	// whose id sorts after after ("" from the first), ordered by id.
	ListSessions(ctx context.Context, tenant, agent, after string, limit int) ([]Session, error)
	// IdleSessions returns up to limit of the tenant's sessions (of agent
	// when not empty; of every tenant when tenant is empty) last written
	// before before, least recently written first: retention's candidates.
	IdleSessions(ctx context.Context, tenant, agent string, before time.Time, limit int) ([]Session, error)
	// ExportSession returns everything stored for the tenant's session,
	// read as one snapshot; ErrNotFound when there is none.
	ExportSession(ctx context.Context, tenant, id string) (*SessionData, error)
	// EraseSession deletes everything stored for the tenant's session in
	// one transaction and returns it as it was, read in that transaction;
	// ErrNotFound when there is none. With a non-zero idleBefore it
	// erases only a session last written before then (ErrConflict
	// otherwise), so a session that became active after retention chose
	// it is kept. Its transcript leaves the cache of this process and, on
	// PostgreSQL, of every replica (ChannelErased). The session's lease row
	// is kept: its fencing token must keep counting up.
	EraseSession(ctx context.Context, tenant, id string, idleBefore time.Time) (*SessionData, error)
}

// ChannelErased is notified when a session is erased: every replica drops
// it from its transcript cache.
const ChannelErased = "turngate_erased"

// SessionData is everything stored for one session. Its JSON is the
// session's export document (gateway/erasure.Document); a field tagged
// "-" is the store's own, not exported.
type SessionData struct {
	Session Session `json:"session"`
	// Messages are the transcript's stored messages (UIMessage JSON, file
	// parts and their data inline), in order.
	Messages []json.RawMessage `json:"messages"`
	// Blocks are the session's writable context blocks, by name.
	Blocks []ContextBlock `json:"memoryBlocks"`
	// Compactions are its compaction summaries, oldest first.
	Compactions []Compaction `json:"summaries"`
	// LastInputTokens is the last step's reported input tokens (0: none).
	LastInputTokens int        `json:"lastInputTokens"`
	Approvals       []Approval `json:"approvals"`
	// ToolResults is the tool journal, oldest first.
	ToolResults []ToolResult `json:"toolJournal"`
	// Submissions are its durable submissions, queued and finished,
	// oldest first.
	Submissions []Submission `json:"submissions"`
	// Turns are the turn outcomes the store recorded, oldest first.
	Turns []TurnRecord `json:"turns"`
	// Decisions are the session's records in the decision store (each
	// its JSONL audit line, the input its rules saw included), in the
	// order they were written.
	Decisions []json.RawMessage `json:"decisions"`
	// RelayBatches counts the stored batches of relayed streams
	// (PostgreSQL's stream relay; always 0 on SQLite).
	RelayBatches int `json:"-"`
}

// ContextBlock is one writable context block of a session.
type ContextBlock struct {
	Name      string    `json:"name"`
	Content   string    `json:"content"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// MaxListSessions bounds one page of ListSessions and IdleSessions.
const MaxListSessions = 1000

// The session records' statements, with ? placeholders (placeholders
// rewrites them for PostgreSQL).
const (
	recordsSessionSQL = `SELECT pk, agent, last_body, created_at, updated_at FROM sessions WHERE tenant = ? AND id = ?`
	listSessionsSQL   = `SELECT id, agent, created_at, updated_at FROM sessions
		WHERE tenant = ? AND agent = ? AND id > ? ORDER BY id LIMIT ?`
	recordsMessagesSQL    = `SELECT body FROM messages WHERE session_pk = ? ORDER BY position`
	recordsBlocksSQL      = `SELECT name, content, updated_at FROM context_blocks WHERE tenant = ? AND session_id = ? ORDER BY name`
	recordsCompactionsSQL = `SELECT ` + compactionColumns + ` FROM compactions WHERE tenant = ? AND session_id = ? ORDER BY seq`
	recordsUsageSQL       = `SELECT last_input_tokens FROM session_usage WHERE tenant = ? AND session_id = ?`
	recordsApprovalsSQL   = `SELECT ` + approvalColumns + ` FROM approvals WHERE tenant = ? AND session_id = ? ORDER BY requested_at, id`
	recordsToolsSQL       = `SELECT request_id, ` + journalColumns + ` FROM tool_results
		WHERE tenant = ? AND session_id = ? ORDER BY created_at, request_id, tool_call_id`
	recordsSubmissionsSQL = `SELECT ` + submissionColumns + ` FROM submissions WHERE session_pk = ? ORDER BY seq`
	recordsTurnsSQL       = `SELECT ` + turnColumns + ` FROM turns WHERE tenant = ? AND session_id = ? ORDER BY seq`
	recordsDecisionsSQL   = `SELECT record FROM decisions WHERE tenant = ? AND session_id = ? ORDER BY id`
	recordsRelaySQL       = `SELECT COUNT(*) FROM stream_chunks WHERE tenant = ? AND session_id = ?`
)

// eraseSQL deletes a session's rows: by its key (the first two) or by
// tenant and id. The session row goes last.
var eraseSQL = append([]string{
	`DELETE FROM messages WHERE session_pk = ?`,
	`DELETE FROM submissions WHERE session_pk = ?`,
	`DELETE FROM context_blocks WHERE tenant = ? AND session_id = ?`,
	`DELETE FROM compactions WHERE tenant = ? AND session_id = ?`,
	`DELETE FROM session_usage WHERE tenant = ? AND session_id = ?`,
	`DELETE FROM approvals WHERE tenant = ? AND session_id = ?`,
	`DELETE FROM tool_results WHERE tenant = ? AND session_id = ?`,
	`DELETE FROM turns WHERE tenant = ? AND session_id = ?`,
}, eraseDecisionsSQL...)

// eraseDecisionsSQL deletes a session's records in the decision store, by
// tenant and id.
var eraseDecisionsSQL = []string{
	`DELETE FROM decision_rules WHERE decision_id IN (SELECT id FROM decisions WHERE tenant = ? AND session_id = ?)`,
	`DELETE FROM decisions WHERE tenant = ? AND session_id = ?`,
}

// recordsTx is what reading and erasing session records needs of a
// driver's transaction. Statements take ? placeholders.
type recordsTx interface {
	query(q string, args ...any) (recordRows, error)
	queryRow(q string, args ...any) rowScanner
	exec(q string, args ...any) error
	// relay reports whether the database keeps relayed streams.
	relay() bool
}

// recordRows are the rows of a recordsTx query.
type recordRows interface {
	rowScanner
	Next() bool
	Err() error
	Close()
}

// eachRow calls f for every row of q and closes them.
func eachRow(tx recordsTx, q string, args []any, f func(rowScanner) error) error {
	rows, err := tx.query(q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := f(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// readRecords reads everything stored for the tenant's session in tx, and
// the session's key.
func readRecords(tx recordsTx, tenant, id string) (*SessionData, int64, error) {
	var (
		pk               int64
		body             []byte
		created, updated int64
		d                = &SessionData{}
	)
	err := tx.queryRow(recordsSessionSQL, tenant, id).Scan(&pk, &d.Session.Agent, &body, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	d.Session = *newSession(tenant, id, d.Session.Agent, body, created, updated)
	byKey, byID := []any{pk}, []any{tenant, id}
	steps := []struct {
		q    string
		args []any
		f    func(rowScanner) error
	}{
		{recordsMessagesSQL, byKey, func(r rowScanner) error {
			var b []byte
			if err := r.Scan(&b); err != nil {
				return err
			}
			d.Messages = append(d.Messages, json.RawMessage(b))
			return nil
		}},
		{recordsBlocksSQL, byID, func(r rowScanner) error {
			var b ContextBlock
			var at int64
			if err := r.Scan(&b.Name, &b.Content, &at); err != nil {
				return err
			}
			b.UpdatedAt = fromNanos(at)
			d.Blocks = append(d.Blocks, b)
			return nil
		}},
		{recordsCompactionsSQL, byID, func(r rowScanner) error {
			c, err := scanCompaction(r)
			d.Compactions = append(d.Compactions, c)
			return err
		}},
		{recordsUsageSQL, byID, func(r rowScanner) error { return r.Scan(&d.LastInputTokens) }},
		{recordsApprovalsSQL, byID, func(r rowScanner) error {
			a, err := scanApproval(r)
			if err == nil {
				d.Approvals = append(d.Approvals, *a)
			}
			return err
		}},
		{recordsToolsSQL, byID, func(r rowScanner) error {
			t, err := scanJournalRow(r, tenant, id)
			if err == nil {
				d.ToolResults = append(d.ToolResults, *t)
			}
			return err
		}},
		{recordsSubmissionsSQL, byKey, func(r rowScanner) error {
			s, err := scanSubmission(r)
			if err == nil {
				d.Submissions = append(d.Submissions, *s)
			}
			return err
		}},
		{recordsTurnsSQL, byID, func(r rowScanner) error {
			t, err := scanTurn(r)
			d.Turns = append(d.Turns, t)
			return err
		}},
		{recordsDecisionsSQL, byID, func(r rowScanner) error {
			var b string
			if err := r.Scan(&b); err != nil {
				return err
			}
			d.Decisions = append(d.Decisions, json.RawMessage(b))
			return nil
		}},
	}
	for _, s := range steps {
		if err := eachRow(tx, s.q, s.args, s.f); err != nil {
			return nil, 0, err
		}
	}
	if tx.relay() {
		if err := tx.queryRow(recordsRelaySQL, tenant, id).Scan(&d.RelayBatches); err != nil {
			return nil, 0, err
		}
	}
	return d, pk, nil
}

// scanJournalRow reads one row of recordsToolsSQL.
func scanJournalRow(r rowScanner, tenant, sessionID string) (*ToolResult, error) {
	t := &ToolResult{ToolCallKey: ToolCallKey{Tenant: tenant, SessionID: sessionID}}
	var out []byte
	var created int64
	if err := r.Scan(&t.RequestID, &t.ToolCallID, &t.ToolName, &t.InputSHA256, &out, &t.Error, &t.Step, &t.CallIndex, &created); err != nil {
		return nil, err
	}
	t.CreatedAt = fromNanos(created)
	if out != nil {
		t.Output = json.RawMessage(out)
	}
	return t, nil
}

// eraseIn erases the tenant's session in tx (see EraseSession) and
// returns what it held.
func eraseIn(tx recordsTx, tenant, id string, idleBefore time.Time) (*SessionData, error) {
	d, pk, err := readRecords(tx, tenant, id)
	if err != nil {
		return nil, err
	}
	if !idleBefore.IsZero() && !d.Session.UpdatedAt.Before(idleBefore) {
		return nil, fmt.Errorf("%w: the session was written at %s, after %s", ErrConflict,
			d.Session.UpdatedAt.Format(time.RFC3339Nano), idleBefore.Format(time.RFC3339Nano))
	}
	for i, q := range eraseSQL {
		args := []any{tenant, id}
		if i < 2 {
			args = []any{pk}
		}
		if err := tx.exec(q, args...); err != nil {
			return nil, err
		}
	}
	if tx.relay() {
		if err := tx.exec(`DELETE FROM stream_chunks WHERE tenant = ? AND session_id = ?`, tenant, id); err != nil {
			return nil, err
		}
	}
	if err := tx.exec(`DELETE FROM sessions WHERE pk = ?`, pk); err != nil {
		return nil, err
	}
	return d, nil
}

// listArgs checks a page size.
func listArgs(limit int) error {
	if limit < 1 || limit > MaxListSessions {
		return fmt.Errorf("%w: a page holds 1 to %d sessions, not %d", ErrInvalid, MaxListSessions, limit)
	}
	return nil
}

// idleSessionsSQL is IdleSessions' query, with its arguments.
func idleSessionsSQL(tenant, agent string, before time.Time, limit int) (string, []any) {
	q := `SELECT tenant, id, agent, created_at, updated_at FROM sessions WHERE updated_at < ?`
	args := []any{nanos(before)}
	if tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, tenant)
	}
	if agent != "" {
		q += ` AND agent = ?`
		args = append(args, agent)
	}
	return q + ` ORDER BY updated_at, tenant, id LIMIT ?`, append(args, limit)
}

// collectSessions reads the rows of a session list: tenant (when withTenant), id, agent, created, updated.
func collectSessions(tx recordsTx, q string, args []any, tenant string) ([]Session, error) {
	out := []Session{}
	err := eachRow(tx, q, args, func(r rowScanner) error {
		var s Session
		var created, updated int64
		dest := []any{&s.ID, &s.Agent, &created, &updated}
		if tenant == "" {
			dest = append([]any{&s.Tenant}, dest...)
		}
		if err := r.Scan(dest...); err != nil {
			return err
		}
		if tenant != "" {
			s.Tenant = tenant
		}
		s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
		out = append(out, s)
		return nil
	})
	return out, err
}

// sqliteRecords is recordsTx on a SQLite transaction or the read pool.
type sqliteRecords struct {
	ctx context.Context
	q   interface {
		QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
		ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	}
}

type sqliteRows struct{ *sql.Rows }

func (r sqliteRows) Close() { _ = r.Rows.Close() }

func (t sqliteRecords) query(q string, args ...any) (recordRows, error) {
	rows, err := t.q.QueryContext(t.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return sqliteRows{rows}, nil
}

func (t sqliteRecords) queryRow(q string, args ...any) rowScanner {
	return t.q.QueryRowContext(t.ctx, q, args...)
}

func (t sqliteRecords) exec(q string, args ...any) error {
	_, err := t.q.ExecContext(t.ctx, q, args...)
	return err
}

func (sqliteRecords) relay() bool { return false }

// pgRecords is recordsTx on a PostgreSQL transaction or pool.
type pgRecords struct {
	ctx context.Context
	q   interface {
		Query(ctx context.Context, q string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, q string, args ...any) pgx.Row
	}
	tx pgx.Tx // nil for reads outside a transaction
}

func (t pgRecords) query(q string, args ...any) (recordRows, error) {
	return t.q.Query(t.ctx, placeholders(q), args...)
}

func (t pgRecords) queryRow(q string, args ...any) rowScanner {
	return t.q.QueryRow(t.ctx, placeholders(q), args...)
}

func (t pgRecords) exec(q string, args ...any) error {
	_, err := t.tx.Exec(t.ctx, placeholders(q), args...)
	return err
}

func (pgRecords) relay() bool { return true }

// ListSessions implements SessionRecords.
func (s *SQLite) ListSessions(ctx context.Context, tenant, agent, after string, limit int) ([]Session, error) {
	if err := listArgs(limit); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	out, err := collectSessions(sqliteRecords{ctx, s.r}, listSessionsSQL, []any{tenant, agent, after, limit}, tenant)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	return out, nil
}

// IdleSessions implements SessionRecords.
func (s *SQLite) IdleSessions(ctx context.Context, tenant, agent string, before time.Time, limit int) ([]Session, error) {
	if err := listArgs(limit); err != nil {
		return nil, fmt.Errorf("listing idle sessions: %w", err)
	}
	q, args := idleSessionsSQL(tenant, agent, before, limit)
	out, err := collectSessions(sqliteRecords{ctx, s.r}, q, args, "")
	if err != nil {
		return nil, fmt.Errorf("listing idle sessions: %w", err)
	}
	return out, nil
}

// ExportSession implements SessionRecords: one read transaction is one
// snapshot of the file.
func (s *SQLite) ExportSession(ctx context.Context, tenant, id string) (*SessionData, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("exporting session: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read only
	d, _, err := readRecords(sqliteRecords{ctx, tx}, tenant, id)
	if err != nil {
		return nil, fmt.Errorf("exporting session: %w", err)
	}
	return d, nil
}

// EraseSession implements SessionRecords.
func (s *SQLite) EraseSession(ctx context.Context, tenant, id string, idleBefore time.Time) (*SessionData, error) {
	var d *SessionData
	err := s.writeThen(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		d, err = eraseIn(sqliteRecords{ctx, tx}, tenant, id, idleBefore)
		return err
	}, s.afterErase(cacheKey{tenant, id}))
	if err != nil {
		return nil, fmt.Errorf("erasing session: %w", err)
	}
	return d, nil
}

// afterErase returns the after of an erasure of k: k leaves the cache; nil
// without a cache.
func (s *transcripts) afterErase(k cacheKey) func() {
	if s.cache == nil {
		return nil
	}
	return func() { s.cache.invalidate(k) }
}

// ListSessions implements SessionRecords.
func (s *Postgres) ListSessions(ctx context.Context, tenant, agent, after string, limit int) ([]Session, error) {
	if err := listArgs(limit); err != nil {
		return nil, fmt.Errorf("listing sessions: %w", err)
	}
	out, err := collectSessions(pgRecords{ctx: ctx, q: s.pool}, listSessionsSQL, []any{tenant, agent, after, limit}, tenant)
	if err != nil {
		return nil, fmt.Errorf("listing sessions: %w", pgError(err))
	}
	return out, nil
}

// IdleSessions implements SessionRecords.
func (s *Postgres) IdleSessions(ctx context.Context, tenant, agent string, before time.Time, limit int) ([]Session, error) {
	if err := listArgs(limit); err != nil {
		return nil, fmt.Errorf("listing idle sessions: %w", err)
	}
	q, args := idleSessionsSQL(tenant, agent, before, limit)
	out, err := collectSessions(pgRecords{ctx: ctx, q: s.pool}, q, args, "")
	if err != nil {
		return nil, fmt.Errorf("listing idle sessions: %w", pgError(err))
	}
	return out, nil
}

// ExportSession implements SessionRecords: a repeatable-read transaction
// is one snapshot.
func (s *Postgres) ExportSession(ctx context.Context, tenant, id string) (*SessionData, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("exporting session: %w", pgError(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read only
	d, _, err := readRecords(pgRecords{ctx: ctx, q: tx, tx: tx}, tenant, id)
	if err != nil {
		return nil, fmt.Errorf("exporting session: %w", pgError(err))
	}
	return d, nil
}

// EraseSession implements SessionRecords. The session row is locked
// first, so a concurrent write of the session waits for the erasure (and
// then finds no session); the same transaction notifies ChannelErased.
func (s *Postgres) EraseSession(ctx context.Context, tenant, id string, idleBefore time.Time) (*SessionData, error) {
	var d *SessionData
	k := cacheKey{tenant, id}
	err := s.write(ctx, k, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM sessions WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id); err != nil {
			return err
		}
		var err error
		if d, err = eraseIn(pgRecords{ctx: ctx, q: tx, tx: tx}, tenant, id, idleBefore); err != nil {
			return err
		}
		return s.notify(ctx, tx, ChannelErased, tenant, id, 0)
	}, s.afterErase(k))
	if err != nil {
		return nil, fmt.Errorf("erasing session: %w", err)
	}
	return d, nil
}

// EraseDecisions implements Decisions.
func (s *SQLite) EraseDecisions(ctx context.Context, tenant, id string) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, q := range eraseDecisionsSQL {
			if _, err := tx.ExecContext(ctx, q, tenant, id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("erasing decisions: %w", err)
	}
	return nil
}

// EraseDecisions implements Decisions.
func (s *Postgres) EraseDecisions(ctx context.Context, tenant, id string) error {
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		for _, q := range eraseDecisionsSQL {
			if _, err := tx.Exec(ctx, placeholders(q), tenant, id); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("erasing decisions: %w", pgError(err))
	}
	return nil
}

func (w *wrapped) EraseDecisions(ctx context.Context, tenant, id string) error {
	return call0(w, ctx, "EraseDecisions", func(ctx context.Context) error { return w.st.EraseDecisions(ctx, tenant, id) })
}
