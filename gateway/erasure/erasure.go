// Package erasure gives a session's stored data the shapes a compliance
// team asks for: one export document of everything stored for a session,
// the erasure of all of it with an audit tombstone, and retention, which
// erases the sessions idle longer than configured.
//
// An erasure removes the session's data from the store (both drivers, one
// transaction) and from every replica's cache. The audit log is
// append-only and hash-chained: the records it already holds about the
// session stay, and the erasure adds one more chained record, the
// tombstone, so `turngate audit verify` still passes. The tombstone holds
// no content: per kind of data, a count and the SHA-256 of the items'
// export (Document), so an export taken before can be matched to it.
package erasure

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/store"
)

// Kinds of erased data, in the order of a tombstone's list.
const (
	KindMessages     = "messages"
	KindFiles        = "files"
	KindMemoryBlocks = "memoryBlocks"
	KindSummaries    = "summaries"
	KindApprovals    = "approvals"
	KindToolJournal  = "toolJournal"
	KindSubmissions  = "submissions"
	KindTurns        = "turns"
)

// Document is the export of everything stored for one session: what
// GET …/sessions/{id}/export answers.
type Document struct {
	Session Session `json:"session"`
	// Messages are the stored transcript (file parts with their data
	// inline, as the client sent them).
	Messages        []json.RawMessage `json:"messages"`
	MemoryBlocks    []MemoryBlock     `json:"memoryBlocks"`
	Summaries       []Summary         `json:"summaries"`
	LastInputTokens int               `json:"lastInputTokens"`
	Approvals       []Approval        `json:"approvals"`
	ToolJournal     []ToolResult      `json:"toolJournal"`
	Submissions     []Submission      `json:"submissions"`
	Turns           []Turn            `json:"turns"`
}

// Session is a session's own fields.
type Session struct {
	ID        string          `json:"id"`
	Agent     string          `json:"agent"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
	LastBody  json.RawMessage `json:"lastBody,omitempty"`
}

// MemoryBlock is a writable context block.
type MemoryBlock struct {
	Name      string    `json:"name"`
	Content   string    `json:"content"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Summary is a compaction summary.
type Summary struct {
	ThroughMessageID string    `json:"throughMessageId"`
	MessageCount     int       `json:"messageCount"`
	Summary          string    `json:"summary"`
	Reason           string    `json:"reason"`
	InputTokens      int       `json:"inputTokens"`
	Model            string    `json:"model"`
	CreatedAt        time.Time `json:"createdAt"`
}

// Approval is a tool call held for approval, and its decision.
type Approval struct {
	ID          string          `json:"id"`
	RequestID   string          `json:"requestId"`
	MessageID   string          `json:"messageId"`
	ToolCallID  string          `json:"toolCallId"`
	ToolName    string          `json:"toolName"`
	Input       json.RawMessage `json:"input"`
	Reasons     json.RawMessage `json:"reasons"`
	Approvers   []string        `json:"approvers"`
	State       string          `json:"state"`
	DecidedBy   string          `json:"decidedBy,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	RequestedAt time.Time       `json:"requestedAt"`
	ExpiresAt   time.Time       `json:"expiresAt"`
	DecidedAt   time.Time       `json:"decidedAt,omitzero"`
}

// ToolResult is one journaled tool outcome.
type ToolResult struct {
	RequestID   string          `json:"requestId"`
	ToolCallID  string          `json:"toolCallId"`
	ToolName    string          `json:"toolName"`
	Step        int             `json:"stepNumber"`
	CallIndex   int             `json:"callIndex"`
	InputSHA256 string          `json:"inputSha256"`
	Output      json.RawMessage `json:"output,omitempty"`
	Error       string          `json:"error,omitempty"`
	CreatedAt   time.Time       `json:"createdAt"`
}

// Submission is a durable submitMessages request.
type Submission struct {
	ID             string          `json:"id"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty"`
	Status         string          `json:"status"`
	Request        json.RawMessage `json:"request"`
	Result         json.RawMessage `json:"result,omitempty"`
	Attempts       int             `json:"attempts"`
	CreatedAt      time.Time       `json:"createdAt"`
	UpdatedAt      time.Time       `json:"updatedAt"`
}

// Turn is a turn outcome the store recorded.
type Turn struct {
	RequestID    string       `json:"requestId"`
	Status       string       `json:"status"`
	FinishReason string       `json:"finishReason,omitempty"`
	Error        string       `json:"error,omitempty"`
	Usage        engine.Usage `json:"usage"`
	RuleRevision string       `json:"ruleRevision"`
	StartedAt    time.Time    `json:"startedAt"`
	FinishedAt   time.Time    `json:"finishedAt"`
}

// NewDocument returns d as an export document.
func NewDocument(d *store.SessionData) *Document {
	s := d.Session
	doc := &Document{
		Session:  Session{ID: s.ID, Agent: s.Agent, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, LastBody: s.LastBody},
		Messages: orEmpty(d.Messages), LastInputTokens: d.LastInputTokens,
		MemoryBlocks: []MemoryBlock{}, Summaries: []Summary{}, Approvals: []Approval{},
		ToolJournal: []ToolResult{}, Submissions: []Submission{}, Turns: []Turn{},
	}
	for _, b := range d.Blocks {
		doc.MemoryBlocks = append(doc.MemoryBlocks, MemoryBlock(b))
	}
	for _, c := range d.Compactions {
		doc.Summaries = append(doc.Summaries, Summary{c.ThroughMessageID, c.MessageCount, c.Summary, c.Reason, c.InputTokens, c.Model, c.CreatedAt})
	}
	for _, a := range d.Approvals {
		doc.Approvals = append(doc.Approvals, Approval{a.ID, a.RequestID, a.MessageID, a.ToolCallID, a.ToolName, a.Input, a.Reasons,
			orEmpty(a.Approvers), a.State, a.DecidedBy, a.Reason, a.RequestedAt, a.ExpiresAt, a.DecidedAt})
	}
	for _, t := range d.ToolResults {
		doc.ToolJournal = append(doc.ToolJournal, ToolResult{t.RequestID, t.ToolCallID, t.ToolName, t.Step, t.CallIndex,
			t.InputSHA256, t.Output, t.Error, t.CreatedAt})
	}
	for _, x := range d.Submissions {
		doc.Submissions = append(doc.Submissions, Submission{x.ID, x.IdempotencyKey, x.Status, x.Request, x.Result, x.Attempts, x.CreatedAt, x.UpdatedAt})
	}
	for _, t := range d.Turns {
		doc.Turns = append(doc.Turns, Turn{t.RequestID, t.Status, t.FinishReason, t.Error, t.Usage, t.RuleRevision, t.StartedAt, t.FinishedAt})
	}
	return doc
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Erased summarises doc for a tombstone: per kind, how many items and the
// hex SHA-256 of their export, each item's JSON (as Document encodes it)
// followed by a newline. Files are the file parts of the messages (their
// JSON as stored), counted apart since a compliance team asks for them.
func Erased(doc *Document) []audit.ErasedKind {
	var files []json.RawMessage
	for _, m := range doc.Messages {
		var msg struct {
			Parts []json.RawMessage `json:"parts"`
		}
		_ = json.Unmarshal(m, &msg) // stored by the gateway: valid
		for _, p := range msg.Parts {
			var part struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(p, &part) == nil && part.Type == "file" {
				files = append(files, p)
			}
		}
	}
	return []audit.ErasedKind{
		kind(KindMessages, doc.Messages),
		kind(KindFiles, files),
		kind(KindMemoryBlocks, doc.MemoryBlocks),
		kind(KindSummaries, doc.Summaries),
		kind(KindApprovals, doc.Approvals),
		kind(KindToolJournal, doc.ToolJournal),
		kind(KindSubmissions, doc.Submissions),
		kind(KindTurns, doc.Turns),
	}
}

// kind hashes items for Erased.
func kind[T any](name string, items []T) audit.ErasedKind {
	h := sha256.New()
	for _, it := range items {
		b, _ := json.Marshal(it) // the export's own types: always encodable
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	return audit.ErasedKind{Kind: name, Count: len(items), SHA256: hex.EncodeToString(h.Sum(nil))}
}

// Request names who asks for an erasure, and why.
type Request struct {
	Tenant, SessionID string
	// Reason is audit.ErasureRequested or audit.ErasureRetention.
	Reason string
	// By and ByTenant are the caller's subject and tenant (empty for
	// retention); RequestID its request.
	By, ByTenant, RequestID string
	// IdleBefore, when not zero, erases the session only while it was
	// last written before then (retention: store.ErrConflict otherwise).
	IdleBefore time.Time
	// Replica names this replica in the tombstone.
	Replica string
}

// Erase erases r's session in st and writes its tombstone to log, once
// the erasure has committed (a failed erasure erased nothing and writes
// nothing). The caller holds the session's turn lock, so no turn of it
// runs meanwhile.
func Erase(ctx context.Context, st store.Store, log *audit.Log, now time.Time, r Request) (*audit.Erasure, error) {
	d, err := st.EraseSession(ctx, r.Tenant, r.SessionID, r.IdleBefore)
	if err != nil {
		return nil, err
	}
	t := &audit.Erasure{Time: now, RequestID: r.RequestID, Reason: r.Reason, By: r.By, ByTenant: r.ByTenant,
		Tenant: r.Tenant, Agent: d.Session.Agent, SessionID: r.SessionID, Erased: Erased(NewDocument(d)), Replica: r.Replica}
	log.Erasure(t)
	return t, nil
}
