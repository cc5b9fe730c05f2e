package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// SessionMemory keeps what an agent's session configuration stores per
// session: writable context blocks, compaction summaries and the last
// step's reported input tokens. Both drivers implement it.
type SessionMemory interface {
	// SessionState returns the session's writable blocks, its latest
	// compaction (nil if none) and its last reported input tokens. A
	// session with nothing stored has an empty state, not ErrNotFound.
	SessionState(ctx context.Context, tenant, sessionID string) (*SessionState, error)
	// PutContextBlock stores the content of the session's writable block
	// name, replacing the previous one.
	PutContextBlock(ctx context.Context, tenant, sessionID, name, content string) error
	// AddCompaction stores a compaction summary and resets the session's
	// last input tokens (they measured the conversation before it).
	AddCompaction(ctx context.Context, c *Compaction) error
	// Compactions returns the session's compactions, oldest first.
	Compactions(ctx context.Context, tenant, sessionID string) ([]Compaction, error)
	// SetLastInputTokens records the input tokens the provider reported
	// for the session's last model step.
	SetLastInputTokens(ctx context.Context, tenant, sessionID string, tokens int) error
	// SearchMessages returns up to limit (1..MaxSearchHits) of the
	// session's stored messages whose text holds any word of query, best
	// first (search.go). Another tenant's session finds nothing.
	SearchMessages(ctx context.Context, tenant, sessionID, query string, limit int) ([]MessageHit, error)
}

// SessionState is a session's stored session-configuration state.
type SessionState struct {
	// Blocks maps writable block names to their content.
	Blocks map[string]string
	// Compaction is the latest compaction, nil if none.
	Compaction *Compaction
	// LastInputTokens is the last step's reported input tokens, 0 when
	// unknown (no step yet, or reset by a compaction).
	LastInputTokens int
}

// Compaction reasons.
const (
	// CompactThreshold: the conversation passed compaction.after.
	CompactThreshold = "threshold"
	// CompactOverflow: the upstream rejected a step as too long.
	CompactOverflow = "overflow"
)

// Compaction is one summary that replaces the start of a transcript: the
// first MessageCount messages, through the message ThroughMessageID. The
// transcript itself is kept whole.
type Compaction struct {
	Tenant           string `json:"-"`
	SessionID        string `json:"-"`
	ThroughMessageID string `json:"throughMessageId"`
	MessageCount     int    `json:"messageCount"`
	Summary          string `json:"summary"`
	// Reason is CompactThreshold or CompactOverflow.
	Reason string `json:"reason"`
	// InputTokens is the measure that triggered it.
	InputTokens int `json:"inputTokens"`
	// Model is the model alias that wrote the summary.
	Model     string    `json:"model"`
	CreatedAt time.Time `json:"createdAt"`
}

// storableText reports text a TEXT column of both drivers can hold:
// PostgreSQL refuses what is not UTF-8 and the NUL byte.
func storableText(name, s string) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return fmt.Errorf("%w: %s is not UTF-8 text without NUL bytes", ErrInvalid, name)
	}
	return nil
}

// compactionArgs checks c and returns its creation time.
func compactionArgs(c *Compaction) (time.Time, error) {
	if err := nonEmpty("tenant", c.Tenant, "session id", c.SessionID, "through message id", c.ThroughMessageID); err != nil {
		return time.Time{}, err
	}
	if c.Reason != CompactThreshold && c.Reason != CompactOverflow {
		return time.Time{}, fmt.Errorf("%w: compaction reason %q", ErrInvalid, c.Reason)
	}
	if c.MessageCount < 1 {
		return time.Time{}, fmt.Errorf("%w: a compaction replaces at least one message", ErrInvalid)
	}
	if err := storableText("summary", c.Summary); err != nil {
		return time.Time{}, err
	}
	if c.CreatedAt.IsZero() {
		return now(), nil
	}
	return c.CreatedAt, nil
}

// blockArgs checks a PutContextBlock's arguments.
func blockArgs(tenant, sessionID, name, content string) error {
	if err := nonEmpty("tenant", tenant, "session id", sessionID, "block name", name); err != nil {
		return err
	}
	return storableText("content", content)
}

// compactionColumns are the columns scanCompaction reads, in order.
const compactionColumns = `tenant, session_id, through_message_id, message_count, summary, reason, input_tokens, model, created_at`

// scanCompaction reads one row of compactionColumns.
func scanCompaction(row rowScanner) (Compaction, error) {
	var (
		c       Compaction
		through []byte
		created int64
	)
	if err := row.Scan(&c.Tenant, &c.SessionID, &through, &c.MessageCount, &c.Summary, &c.Reason, &c.InputTokens, &c.Model, &created); err != nil {
		return Compaction{}, err
	}
	c.ThroughMessageID, c.CreatedAt = string(through), fromNanos(created)
	return c, nil
}

// collectCompactions reads the rows of a compactions query (of either
// driver) and closes them.
func collectCompactions(next func() bool, rowsErr, closeRows func() error, row rowScanner) ([]Compaction, error) {
	defer closeRows() //nolint:errcheck // reading is done; Err reports a failure.
	out := []Compaction{}
	for next() {
		c, err := scanCompaction(row)
		if err != nil {
			return nil, fmt.Errorf("reading compactions: %w", err)
		}
		out = append(out, c)
	}
	if err := rowsErr(); err != nil {
		return nil, fmt.Errorf("reading compactions: %w", err)
	}
	return out, nil
}
