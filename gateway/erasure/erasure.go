// Package erasure gives a session's stored data the shapes a compliance
// team asks for: one export document of everything stored for a session,
// the erasure of all of it with an audit tombstone, and retention, which
// erases the sessions idle longer than configured.
//
// An erasure removes the session's data from the store (both drivers, one
// transaction), its records in the decision store included, and from
// every replica's cache. The audit log is
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
	KindDecisions    = "decisions"
)

// Document is the export of everything stored for one session: what
// GET …/sessions/{id}/export answers. It is the store's SessionData, whose
// JSON tags name the document's fields and leave out the store's own (the
// tenant, the principal of an approval, the relay's batches): messages are
// the stored transcript (file parts with their data inline, as the client
// sent them), and every list is [] when empty.
type Document = store.SessionData

// NewDocument returns d as an export document: a copy whose empty lists,
// and approvals' empty approvers, are [] rather than null.
func NewDocument(d *store.SessionData) *Document {
	doc := *d
	doc.Messages, doc.Blocks, doc.Compactions = orEmpty(d.Messages), orEmpty(d.Blocks), orEmpty(d.Compactions)
	doc.ToolResults, doc.Submissions, doc.Turns = orEmpty(d.ToolResults), orEmpty(d.Submissions), orEmpty(d.Turns)
	doc.Decisions = orEmpty(d.Decisions)
	doc.Approvals = make([]store.Approval, 0, len(d.Approvals))
	for _, a := range d.Approvals {
		a.Approvers = orEmpty(a.Approvers)
		doc.Approvals = append(doc.Approvals, a)
	}
	return &doc
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
		kind(KindMemoryBlocks, doc.Blocks),
		kind(KindSummaries, doc.Compactions),
		kind(KindApprovals, doc.Approvals),
		kind(KindToolJournal, doc.ToolResults),
		kind(KindSubmissions, doc.Submissions),
		kind(KindTurns, doc.Turns),
		kind(KindDecisions, doc.Decisions),
	}
}

// kind hashes items for Erased.
func kind[T any](name string, items []T) audit.ErasedKind {
	h := sha256.New()
	for _, it := range items {
		b, _ := json.Marshal(it) // the store's types: always encodable
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
	// Erased, if set, is told of the erasure once it has committed (the
	// decision store's writer, whose queue may hold the session's records:
	// decisions.Writer.Erased).
	Erased func(tenant, sessionID string)
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
	if r.Erased != nil {
		r.Erased(r.Tenant, r.SessionID)
	}
	t := &audit.Erasure{Time: now, RequestID: r.RequestID, Reason: r.Reason, By: r.By, ByTenant: r.ByTenant,
		Tenant: r.Tenant, Agent: d.Session.Agent, SessionID: r.SessionID, Erased: Erased(NewDocument(d)), Replica: r.Replica}
	log.Erasure(t)
	return t, nil
}
