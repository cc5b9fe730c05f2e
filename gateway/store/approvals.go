package store

import (
	"encoding/json"
	"errors"
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
	ID        string `json:"id"`
	Tenant    string `json:"-"`
	SessionID string `json:"-"`
	Agent     string `json:"-"`
	// RequestID is the turn that asked; MessageID the assistant message
	// holding the call.
	RequestID  string `json:"requestId"`
	MessageID  string `json:"messageId"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	// Input is the input that would run.
	Input json.RawMessage `json:"input"`
	// Reasons are the rules' reasons ([{reason, approvers?}]).
	Reasons json.RawMessage `json:"reasons"`
	// Approvers are the roles ("role:NAME") that may decide; empty means
	// the chat user may.
	Approvers []string `json:"approvers"`
	// Principal is the principal the asking turn ran for (JSON), which
	// the turn resumes as.
	Principal json.RawMessage `json:"-"`
	State     string          `json:"state"`
	// DecidedBy is the deciding principal's subject ("" for an expiry).
	DecidedBy   string    `json:"decidedBy,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	RequestedAt time.Time `json:"requestedAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// DecidedAt is zero while pending.
	DecidedAt time.Time `json:"decidedAt,omitzero"`
}

// Decision is DecideApproval's decision of one approval.
type Decision struct {
	// State is approved, denied or expired.
	State string
	// By is the deciding principal's subject ("" for the gateway's own
	// decisions).
	By     string
	Reason string
	At     time.Time
	// Resume, when not nil, queues the resume of the turn when this
	// decision is its message's last.
	Resume Resume
}

// Resume makes the submission that resumes the turn of a's message once
// none of the message's approvals is pending; a is the approval whose
// decision completed them. The store queues it in the decision's own
// transaction, without queue limits (a decision is never refused for a full
// queue), in a's session (which must exist). Its IdempotencyKey, when set,
// makes a repeated resume the submission already queued. Resume may run
// more than once for one decision (a retried transaction): it must only
// build the submission.
type Resume func(a *Approval) *Submission

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
	// messagePendingSQL finds an approval of a message still pending.
	messagePendingSQL = `SELECT 1 FROM approvals
		WHERE tenant = ? AND session_id = ? AND message_id = ? AND state = 'pending' LIMIT 1`
	// anyExpiredSQL lets the sweep skip its write when nothing expired
	// (an index seek on approvals_pending).
	anyExpiredSQL = `SELECT 1 FROM approvals WHERE state = 'pending' AND expires_at <= ? LIMIT 1`
	// countPendingSQL counts the pending approvals by tenant: a scan of
	// the covering approvals_pending_by_tenant, which holds only them.
	countPendingSQL    = `SELECT tenant, COUNT(*) FROM approvals WHERE state = 'pending' GROUP BY tenant`
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
func decideArgs(tenant, id string, d Decision) ([]any, error) {
	switch d.State {
	case ApprovalApproved, ApprovalDenied, ApprovalExpired:
	default:
		return nil, fmt.Errorf("%w: approval state %q is not approved, denied or expired", ErrInvalid, d.State)
	}
	return []any{d.State, d.By, d.Reason, nanos(d.At), tenant, id, nanos(d.At), d.State}, nil
}

// approvalTx is what deciding approvals needs of a driver's transaction.
// Its statements take ? placeholders.
type approvalTx interface {
	// queryRow runs q and returns its row.
	queryRow(q string, args ...any) rowScanner
	// queryApprovals runs q and reads its rows of approvalColumns.
	queryApprovals(q string, args ...any) ([]Approval, error)
	// lockMessage locks every approval of the message, in id order, until
	// the transaction ends, so that of two decisions of its approvals the
	// second sees the first's outcome when it checks what is left pending.
	// SQLite's single writer needs no lock.
	lockMessage(tenant, sessionID, messageID string) error
	// lockExpired locks, in the order lockMessage takes its locks, every
	// approval of each message with an approval pending that expired at at.
	lockExpired(at int64) error
	// queueResume stores sub as queued in its session, without queue
	// limits, or returns the submission that holds its idempotency key.
	queueResume(sub *Submission) (*Submission, error)
}

// decideIn decides the tenant's approval id in tx with decideArgs' args,
// and queues its turn's resume when resume is set and the decision is its
// message's last.
func decideIn(tx approvalTx, tenant, id string, args []any, resume Resume) (*Approval, *Submission, error) {
	cur, err := scanApproval(tx.queryRow(getApprovalSQL, tenant, id))
	if err != nil {
		return nil, nil, notFound(err)
	}
	if err := tx.lockMessage(tenant, cur.SessionID, cur.MessageID); err != nil {
		return nil, nil, err
	}
	a, err := scanApproval(tx.queryRow(decideApprovalSQL, args...))
	if err != nil {
		if errors.Is(notFound(err), ErrNotFound) {
			err = undecidable(scanApproval(tx.queryRow(getApprovalSQL, tenant, id)))
		}
		return nil, nil, err
	}
	sub, err := resumeIfLast(tx, a, resume)
	if err != nil {
		return nil, nil, err
	}
	return a, sub, nil
}

// expireIn expires in tx every approval pending that expired at at, and
// queues the resume of each message left with none pending when resume is
// set.
func expireIn(tx approvalTx, at int64, resume Resume) ([]Approval, []Submission, error) {
	if err := tx.lockExpired(at); err != nil {
		return nil, nil, err
	}
	expired, err := tx.queryApprovals(expireApprovalsSQL, at, at)
	if err != nil {
		return nil, nil, err
	}
	subs := []Submission{}
	seen := map[[3]string]bool{}
	for i := range expired {
		a := &expired[i]
		m := [3]string{a.Tenant, a.SessionID, a.MessageID}
		if seen[m] {
			continue
		}
		seen[m] = true
		sub, err := resumeIfLast(tx, a, resume)
		if err != nil {
			return nil, nil, err
		}
		if sub != nil {
			subs = append(subs, *sub)
		}
	}
	return expired, subs, nil
}

// resumeIfLast queues resume's submission for decided, the approval just
// decided, when none of its message's approvals is pending; nil when
// resume is nil or one is.
func resumeIfLast(tx approvalTx, decided *Approval, resume Resume) (*Submission, error) {
	if resume == nil {
		return nil, nil
	}
	var one int
	err := tx.queryRow(messagePendingSQL, decided.Tenant, decided.SessionID, decided.MessageID).Scan(&one)
	switch err = notFound(err); {
	case err == nil:
		return nil, nil // another approval of the message is pending
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	sub, err := tx.queueResume(resume(decided))
	if err != nil {
		return nil, fmt.Errorf("queueing the resume of message %q: %w", decided.MessageID, err)
	}
	return sub, nil
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
