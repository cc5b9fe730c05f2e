package audit

import (
	"encoding/json"
	"time"
)

// KindApproval is the kind of approval records.
const KindApproval = "approval"

// Approval is the audit record of one event of a tool-call approval:
// requested, approved, denied, expired, or ignored (an answer that did not
// count: forged, replayed, from a principal without an approver role, too
// late).
type Approval struct {
	Time       time.Time `json:"time"`
	Outcome    string    `json:"outcome"`
	ApprovalID string    `json:"approvalId"`
	Tenant     string    `json:"tenant"`
	SessionID  string    `json:"sessionId"`
	Agent      string    `json:"agent,omitempty"`
	RequestID  string    `json:"requestId,omitempty"`
	ToolCallID string    `json:"toolCallId"`
	ToolName   string    `json:"toolName,omitempty"`
	// Input and Reasons are on requested records: what would run and why
	// it needs approval.
	Input     json.RawMessage `json:"input,omitempty"`
	Reasons   json.RawMessage `json:"reasons,omitempty"`
	Approvers []string        `json:"approvers,omitempty"`
	ExpiresAt *time.Time      `json:"expiresAt,omitempty"`
	// By is the subject that decided or answered ("" for an expiry).
	By string `json:"by,omitempty"`
	// Reason is the approver's reason ("expired" for an expiry).
	Reason    string     `json:"reason,omitempty"`
	DecidedAt *time.Time `json:"decidedAt,omitempty"`
	// Why says why an answer was ignored.
	Why string `json:"why,omitempty"`
	// AlsoIgnored is how many more answers of the same chat request were
	// ignored: a request gets one ignored record, of its first.
	AlsoIgnored int `json:"alsoIgnored,omitempty"`
}

// Approval writes an approval record.
func (l *Log) Approval(a *Approval) { l.write(KindApproval, a) }
