package audit

import "time"

// KindErasure is the kind of erasure records: a session was erased, on a
// caller's request or by retention. The records written earlier about the
// session stay as they are (the hash chain links them): an erasure removes
// the session's data from the store, and its record says what went.
const KindErasure = "erasure"

// Erasure reasons.
const (
	ErasureRequested = "requested"
	ErasureRetention = "retention"
)

// Erasure is the tombstone of an erased session: who erased it, when,
// why, and of each kind of data how many items went and the SHA-256 of
// them, so an export taken before can be matched to what was erased
// without the record holding any of it.
type Erasure struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"requestId,omitempty"`
	// Reason is ErasureRequested or ErasureRetention.
	Reason string `json:"reason"`
	// By is the subject (and ByTenant the tenant) of the caller who asked;
	// empty for retention.
	By        string `json:"by,omitempty"`
	ByTenant  string `json:"byTenant,omitempty"`
	Tenant    string `json:"tenant"`
	Agent     string `json:"agent"`
	SessionID string `json:"sessionId"`
	// Erased lists the kinds of data erased, in a fixed order.
	Erased  []ErasedKind `json:"erased"`
	Replica string       `json:"replica,omitempty"`
}

// ErasedKind is one kind of erased data: how many items, and the hex
// SHA-256 of their export (see gateway/erasure).
type ErasedKind struct {
	Kind   string `json:"kind"`
	Count  int    `json:"count"`
	SHA256 string `json:"sha256"`
}

// Erasure writes an erasure record.
func (l *Log) Erasure(e *Erasure) { l.write(KindErasure, e) }
