package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ToolCallKey names one tool call of one turn. RequestID is the turn's
// request id, which every run of a submission shares ("sub_" and its id), so
// a re-run after a crash finds what the crashed run journaled; ToolCallID is
// the model's id of the call.
type ToolCallKey struct {
	Tenant     string `json:"-"`
	SessionID  string `json:"-"`
	RequestID  string `json:"requestId"`
	ToolCallID string `json:"toolCallId"`
}

// ToolResult is the journaled outcome of one executed tool call: its output,
// or the error it failed with.
type ToolResult struct {
	ToolCallKey
	ToolName string `json:"toolName"`
	// Step and CallIndex are the call's position in its turn: its step
	// number and its index among the step's calls.
	Step      int `json:"stepNumber"`
	CallIndex int `json:"callIndex"`
	// InputSHA256 is the hex SHA-256 of the input the tool ran with, so a
	// re-run tells the same call from another under a reused id.
	InputSHA256 string `json:"inputSha256"`
	// Output is the tool's output (JSON); nil when Error is set.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the tool's error text; empty on success.
	Error     string    `json:"error,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// The tool journal's statements, the same text on both drivers but for the
// placeholders and PostgreSQL's fence.
const (
	sqliteJournalTool = `INSERT INTO tool_results
		(tenant, session_id, request_id, tool_call_id, tool_name, input_sha256, output, error, step, call_index, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, session_id, request_id, tool_call_id) DO UPDATE SET
		tool_name = excluded.tool_name, input_sha256 = excluded.input_sha256, output = excluded.output,
		error = excluded.error, step = excluded.step, call_index = excluded.call_index, created_at = excluded.created_at`
	// The call of that id, else the latest journaled at that position.
	sqliteJournaledTool = `SELECT ` + journalColumns + ` FROM tool_results
		WHERE tenant = ? AND session_id = ? AND request_id = ? AND (tool_call_id = ? OR (step = ? AND call_index = ?))
		ORDER BY tool_call_id = ? DESC, created_at DESC LIMIT 1`
	// Fenced by the lease token $12 (NULL: none) in the same statement,
	// through migration 0009's turngate_fence: one round trip, where a
	// transaction around pgFence takes four.
	pgJournalTool = `INSERT INTO tool_results
		(tenant, session_id, request_id, tool_call_id, tool_name, input_sha256, output, error, step, call_index, created_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 FROM turngate_fence($1, $2, $12)
		ON CONFLICT (tenant, session_id, request_id, tool_call_id) DO UPDATE SET
		tool_name = excluded.tool_name, input_sha256 = excluded.input_sha256, output = excluded.output,
		error = excluded.error, step = excluded.step, call_index = excluded.call_index, created_at = excluded.created_at`
	pgJournaledTool = `SELECT ` + journalColumns + ` FROM tool_results
		WHERE tenant = $1 AND session_id = $2 AND request_id = $3 AND (tool_call_id = $4 OR (step = $5 AND call_index = $6))
		ORDER BY tool_call_id = $4 DESC, created_at DESC LIMIT 1`
	journalColumns = `tool_call_id, tool_name, input_sha256, output, error, step, call_index, created_at`
)

// keyArgs checks k: every part present and UTF-8 (PostgreSQL's text refuses
// other bytes, so both drivers do).
func keyArgs(k ToolCallKey) error {
	pairs := []string{"tenant", k.Tenant, "session id", k.SessionID, "request id", k.RequestID, "tool call id", k.ToolCallID}
	if err := nonEmpty(pairs...); err != nil {
		return err
	}
	for i := 0; i < len(pairs); i += 2 {
		if !utf8.ValidString(pairs[i+1]) {
			return fmt.Errorf("%w: %s is not UTF-8", ErrInvalid, pairs[i])
		}
	}
	return nil
}

// journalArgs checks r and returns the arguments of the insert.
func journalArgs(r *ToolResult) ([]any, error) {
	if err := keyArgs(r.ToolCallKey); err != nil {
		return nil, err
	}
	if err := nonEmpty("tool name", r.ToolName, "input sha256", r.InputSHA256); err != nil {
		return nil, err
	}
	if !utf8.ValidString(r.ToolName) || !utf8.ValidString(r.Error) {
		return nil, fmt.Errorf("%w: tool name or error is not UTF-8", ErrInvalid)
	}
	if (r.Error == "") == (len(r.Output) == 0) {
		return nil, fmt.Errorf("%w: a tool result has either an output or an error", ErrInvalid)
	}
	out, err := jsonArg("tool output", r.Output)
	if err != nil {
		return nil, err
	}
	return []any{r.Tenant, r.SessionID, r.RequestID, r.ToolCallID, r.ToolName, r.InputSHA256, out, r.Error,
		r.Step, r.CallIndex, nanos(now())}, nil
}

// scanToolResult reads a journaled result of k's request; ErrNotFound when
// there is none.
func scanToolResult(row rowScanner, k ToolCallKey) (*ToolResult, error) {
	r := &ToolResult{ToolCallKey: k}
	var out []byte
	var created int64
	err := row.Scan(&r.ToolCallID, &r.ToolName, &r.InputSHA256, &out, &r.Error, &r.Step, &r.CallIndex, &created)
	if errors.Is(err, sql.ErrNoRows) || errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if out != nil {
		r.Output = json.RawMessage(out)
	}
	r.CreatedAt = fromNanos(created)
	return r, nil
}

// JournalToolResult implements Store.
func (s *SQLite) JournalToolResult(ctx context.Context, r *ToolResult) error {
	args, err := journalArgs(r)
	if err != nil {
		return fmt.Errorf("journaling tool result: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.leases.check(fenceOf(ctx, r.Tenant, r.SessionID)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, sqliteJournalTool, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("journaling tool result: %w", err)
	}
	return nil
}

// JournaledToolResult implements Store.
func (s *SQLite) JournaledToolResult(ctx context.Context, k ToolCallKey, step, index int) (*ToolResult, error) {
	if err := keyArgs(k); err != nil {
		return nil, fmt.Errorf("reading tool result: %w", err)
	}
	r, err := scanToolResult(s.r.QueryRowContext(ctx, sqliteJournaledTool,
		k.Tenant, k.SessionID, k.RequestID, k.ToolCallID, step, index, k.ToolCallID), k)
	if err != nil {
		return nil, fmt.Errorf("reading tool result: %w", err)
	}
	return r, nil
}

// JournalToolResult implements Store.
func (s *Postgres) JournalToolResult(ctx context.Context, r *ToolResult) error {
	args, err := journalArgs(r)
	if err != nil {
		return fmt.Errorf("journaling tool result: %w", err)
	}
	args = append(args, fenceToken(ctx, r.Tenant, r.SessionID))
	err = s.writeStatement(ctx, cacheKey{}, func(ctx context.Context, conn *pgxpool.Conn) error {
		_, err := conn.Exec(ctx, pgJournalTool, args...)
		return err
	}, nil)
	if err != nil {
		return fmt.Errorf("journaling tool result: %w", err)
	}
	return nil
}

// JournaledToolResult implements Store.
func (s *Postgres) JournaledToolResult(ctx context.Context, k ToolCallKey, step, index int) (*ToolResult, error) {
	if err := keyArgs(k); err != nil {
		return nil, fmt.Errorf("reading tool result: %w", err)
	}
	r, err := scanToolResult(s.pool.QueryRow(ctx, pgJournaledTool, k.Tenant, k.SessionID, k.RequestID, k.ToolCallID, step, index), k)
	if err != nil {
		return nil, fmt.Errorf("reading tool result: %w", pgError(err))
	}
	return r, nil
}
