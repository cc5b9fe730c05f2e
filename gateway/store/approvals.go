package store

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Approval states. An approval starts pending and is decided once.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
)

// Approval is a tool call held for a person's approval.
type Approval struct {
	ID        string
	Tenant    string
	SessionID string
	Agent     string
	// RequestID is the turn that asked; MessageID the assistant message
	// holding the call.
	RequestID  string
	MessageID  string
	ToolCallID string
	ToolName   string
	// Input is the input that would run.
	Input json.RawMessage
	// Reasons are the rules' reasons ([{reason, approvers?}]).
	Reasons json.RawMessage
	// Approvers are the roles ("role:NAME") that may decide; empty means
	// the chat user may.
	Approvers []string
	// Principal is the principal the asking turn ran for (JSON), which
	// the turn resumes as.
	Principal json.RawMessage
	State     string
	// DecidedBy is the deciding principal's subject ("" for an expiry).
	DecidedBy   string
	Reason      string
	RequestedAt time.Time
	ExpiresAt   time.Time
	// DecidedAt is zero while pending.
	DecidedAt time.Time
}

// ApprovalFilter selects approvals of one tenant: of one session and/or in
// one state when those are set.
type ApprovalFilter struct {
	SessionID string
	State     string
}

// approvalColumns are the columns scanApproval reads, in order.
const approvalColumns = `id, tenant, session_id, agent, request_id, message_id, tool_call_id, tool_name,
	input, reasons, approvers, principal, state, decided_by, reason, requested_at, expires_at, decided_at`

// approvalSQL holds the approval statements with ? placeholders;
// placeholders renders them for PostgreSQL.
const (
	insertApprovalSQL = `INSERT INTO approvals (` + approvalColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', '', '', ?, ?, 0)`
	getApprovalSQL    = `SELECT ` + approvalColumns + ` FROM approvals WHERE tenant = ? AND id = ?`
	decideApprovalSQL = `UPDATE approvals SET state = ?, decided_by = ?, reason = ?, decided_at = ?
		WHERE tenant = ? AND id = ? AND state = 'pending' AND (expires_at > ? OR ? = 'expired')
		RETURNING ` + approvalColumns
	// anyExpiredSQL lets the sweep skip its write when nothing expired
	// (an index seek on approvals_pending).
	anyExpiredSQL      = `SELECT 1 FROM approvals WHERE state = 'pending' AND expires_at <= ? LIMIT 1`
	expireApprovalsSQL = `UPDATE approvals SET state = 'expired', reason = 'expired', decided_at = ?
		WHERE state = 'pending' AND expires_at <= ? RETURNING ` + approvalColumns
)

// listApprovalsSQL is the list query for f, with its arguments.
func listApprovalsSQL(tenant string, f ApprovalFilter) (string, []any) {
	q := `SELECT ` + approvalColumns + ` FROM approvals WHERE tenant = ?`
	args := []any{tenant}
	if f.SessionID != "" {
		q += ` AND session_id = ?`
		args = append(args, f.SessionID)
	}
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	return q + ` ORDER BY requested_at, id`, args
}

// placeholders rewrites ? placeholders as PostgreSQL's $1, $2, ….
func placeholders(q string) string {
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// approvalArgs checks a to be created and returns its insert arguments.
func approvalArgs(a *Approval) ([]any, error) {
	if err := nonEmpty("tenant", a.Tenant, "session id", a.SessionID, "agent", a.Agent, "approval id", a.ID,
		"message id", a.MessageID, "tool call id", a.ToolCallID, "tool name", a.ToolName); err != nil {
		return nil, err
	}
	approvers := a.Approvers
	if approvers == nil {
		approvers = []string{}
	}
	roles, _ := json.Marshal(approvers)
	args := []any{a.ID, a.Tenant, a.SessionID, a.Agent, a.RequestID, a.MessageID, a.ToolCallID, a.ToolName}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"input", a.Input}, {"reasons", a.Reasons}, {"approvers", roles}, {"principal", a.Principal}} {
		if !json.Valid(f.v) {
			return nil, fmt.Errorf("%w: approval %s is not JSON", ErrInvalid, f.name)
		}
		args = append(args, string(f.v))
	}
	return append(args, nanos(a.RequestedAt), nanos(a.ExpiresAt)), nil
}

// decideArgs checks a decision's state and returns its update arguments.
func decideArgs(tenant, id, state, decidedBy, reason string, at time.Time) ([]any, error) {
	switch state {
	case ApprovalApproved, ApprovalDenied, ApprovalExpired:
	default:
		return nil, fmt.Errorf("%w: approval state %q is not approved, denied or expired", ErrInvalid, state)
	}
	return []any{state, decidedBy, reason, nanos(at), tenant, id, nanos(at), state}, nil
}

// scanApproval reads one row of approvalColumns.
func scanApproval(row rowScanner) (*Approval, error) {
	var (
		a                           Approval
		input, reasons, roles, prin string
		requested, expires, decided int64
	)
	if err := row.Scan(&a.ID, &a.Tenant, &a.SessionID, &a.Agent, &a.RequestID, &a.MessageID, &a.ToolCallID, &a.ToolName,
		&input, &reasons, &roles, &prin, &a.State, &a.DecidedBy, &a.Reason, &requested, &expires, &decided); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(roles), &a.Approvers); err != nil {
		return nil, fmt.Errorf("decoding approvers: %w", err)
	}
	a.Input, a.Reasons, a.Principal = json.RawMessage(input), json.RawMessage(reasons), json.RawMessage(prin)
	a.RequestedAt, a.ExpiresAt = fromNanos(requested), fromNanos(expires)
	if decided != 0 {
		a.DecidedAt = fromNanos(decided)
	}
	return &a, nil
}

// scanApprovals reads every row of rows.
func scanApprovals(rows interface {
	rowScanner
	Next() bool
	Err() error
}) ([]Approval, error) {
	out := []Approval{}
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	return out, rows.Err()
}
