package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/turngate/turngate/engine"
)

// Middleware runs call, one call of the Store method op, as it sees fit: it
// may give it another ctx, classify its error, or fail it without calling
// it. call sets the method's results.
type Middleware func(ctx context.Context, op string, call func(ctx context.Context) error) error

// Wrap returns st with every call going through mw (but Close, and
// Relay.Listen, which lasts as long as its ctx). The result implements
// Relay when st does.
func Wrap(st Store, mw Middleware) Store {
	w := &wrapped{st: st, mw: mw}
	if relay, ok := st.(Relay); ok {
		return &wrappedRelay{wrapped: w, relay: relay}
	}
	return w
}

// wrapped is Wrap's Store.
type wrapped struct {
	st Store
	mw Middleware
}

// wrappedRelay is Wrap's Store of a Relay.
type wrappedRelay struct {
	*wrapped
	relay Relay
}

func call0(w *wrapped, ctx context.Context, op string, f func(context.Context) error) error {
	return w.mw(ctx, op, f)
}

func call1[T any](w *wrapped, ctx context.Context, op string, f func(context.Context) (T, error)) (T, error) {
	var v T
	err := w.mw(ctx, op, func(ctx context.Context) (err error) {
		v, err = f(ctx)
		return err
	})
	return v, err
}

func call2[T, U any](w *wrapped, ctx context.Context, op string, f func(context.Context) (T, U, error)) (T, U, error) {
	var (
		v T
		u U
	)
	err := w.mw(ctx, op, func(ctx context.Context) (err error) {
		v, u, err = f(ctx)
		return err
	})
	return v, u, err
}

// Close implements Store.
func (w *wrapped) Close() error { return w.st.Close() }

// Listen implements Relay: it goes straight to the store.
func (w *wrappedRelay) Listen(ctx context.Context, ready func(), f func(Notification)) error {
	return w.relay.Listen(ctx, ready, f)
}

// The other methods go through the middleware.

func (w *wrapped) GetOrCreateSession(ctx context.Context, tenant, agent, id string) (*Session, bool, error) {
	return call2(w, ctx, "GetOrCreateSession", func(ctx context.Context) (*Session, bool, error) {
		return w.st.GetOrCreateSession(ctx, tenant, agent, id)
	})
}

func (w *wrapped) GetSession(ctx context.Context, tenant, id string) (*Session, error) {
	return call1(w, ctx, "GetSession", func(ctx context.Context) (*Session, error) { return w.st.GetSession(ctx, tenant, id) })
}

func (w *wrapped) SetLastBody(ctx context.Context, tenant, id string, body json.RawMessage) error {
	return call0(w, ctx, "SetLastBody", func(ctx context.Context) error { return w.st.SetLastBody(ctx, tenant, id, body) })
}

func (w *wrapped) Admit(ctx context.Context, tenant, agent, sessionID string, lastBody json.RawMessage, user *engine.UIMessage) (*Session, error) {
	return call1(w, ctx, "Admit", func(ctx context.Context) (*Session, error) {
		return w.st.Admit(ctx, tenant, agent, sessionID, lastBody, user)
	})
}

func (w *wrapped) Messages(ctx context.Context, tenant, sessionID string) ([]engine.UIMessage, error) {
	return call1(w, ctx, "Messages", func(ctx context.Context) ([]engine.UIMessage, error) { return w.st.Messages(ctx, tenant, sessionID) })
}

func (w *wrapped) Transcript(ctx context.Context, tenant, sessionID string) (*Session, []engine.UIMessage, error) {
	return call2(w, ctx, "Transcript", func(ctx context.Context) (*Session, []engine.UIMessage, error) {
		return w.st.Transcript(ctx, tenant, sessionID)
	})
}

func (w *wrapped) AppendMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage) error {
	return call0(w, ctx, "AppendMessage", func(ctx context.Context) error { return w.st.AppendMessage(ctx, tenant, sessionID, m) })
}

func (w *wrapped) UpsertMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage) error {
	return call0(w, ctx, "UpsertMessage", func(ctx context.Context) error { return w.st.UpsertMessage(ctx, tenant, sessionID, m) })
}

func (w *wrapped) TruncateAfter(ctx context.Context, tenant, sessionID, messageID string, inclusive bool) error {
	return call0(w, ctx, "TruncateAfter", func(ctx context.Context) error {
		return w.st.TruncateAfter(ctx, tenant, sessionID, messageID, inclusive)
	})
}

func (w *wrapped) CreateSubmission(ctx context.Context, s *Submission, limits QueueLimits) (*Submission, bool, error) {
	return call2(w, ctx, "CreateSubmission", func(ctx context.Context) (*Submission, bool, error) { return w.st.CreateSubmission(ctx, s, limits) })
}

func (w *wrapped) GetSubmission(ctx context.Context, tenant, sessionID, id string) (*Submission, error) {
	return call1(w, ctx, "GetSubmission", func(ctx context.Context) (*Submission, error) { return w.st.GetSubmission(ctx, tenant, sessionID, id) })
}

func (w *wrapped) ClaimSubmission(ctx context.Context, owner string, ttl time.Duration) (*Submission, error) {
	return call1(w, ctx, "ClaimSubmission", func(ctx context.Context) (*Submission, error) { return w.st.ClaimSubmission(ctx, owner, ttl) })
}

func (w *wrapped) RenewSubmission(ctx context.Context, sub *Submission, ttl time.Duration) error {
	return call0(w, ctx, "RenewSubmission", func(ctx context.Context) error { return w.st.RenewSubmission(ctx, sub, ttl) })
}

func (w *wrapped) FinishSubmission(ctx context.Context, id string, claim int, status string, result json.RawMessage) error {
	return call0(w, ctx, "FinishSubmission", func(ctx context.Context) error { return w.st.FinishSubmission(ctx, id, claim, status, result) })
}

func (w *wrapped) SetSubmissionRequest(ctx context.Context, id string, claim int, request json.RawMessage) error {
	return call0(w, ctx, "SetSubmissionRequest", func(ctx context.Context) error { return w.st.SetSubmissionRequest(ctx, id, claim, request) })
}

func (w *wrapped) RequeueRunning(ctx context.Context) (int, error) {
	return call1(w, ctx, "RequeueRunning", func(ctx context.Context) (int, error) { return w.st.RequeueRunning(ctx) })
}

func (w *wrapped) DropQueued(ctx context.Context, tenant, sessionID string) (int, error) {
	return call1(w, ctx, "DropQueued", func(ctx context.Context) (int, error) { return w.st.DropQueued(ctx, tenant, sessionID) })
}

func (w *wrapped) AcquireLease(ctx context.Context, tenant, sessionID, owner string, ttl time.Duration) (*Lease, error) {
	return call1(w, ctx, "AcquireLease", func(ctx context.Context) (*Lease, error) {
		return w.st.AcquireLease(ctx, tenant, sessionID, owner, ttl)
	})
}

func (w *wrapped) RenewLease(ctx context.Context, l *Lease, ttl time.Duration) (LeaseState, error) {
	return call1(w, ctx, "RenewLease", func(ctx context.Context) (LeaseState, error) { return w.st.RenewLease(ctx, l, ttl) })
}

func (w *wrapped) ReleaseLease(ctx context.Context, l *Lease) error {
	return call0(w, ctx, "ReleaseLease", func(ctx context.Context) error { return w.st.ReleaseLease(ctx, l) })
}

func (w *wrapped) CancelLease(ctx context.Context, tenant, sessionID string, token int64) (bool, error) {
	return call1(w, ctx, "CancelLease", func(ctx context.Context) (bool, error) { return w.st.CancelLease(ctx, tenant, sessionID, token) })
}

func (w *wrapped) RecordTurn(ctx context.Context, t *TurnRecord) error {
	return call0(w, ctx, "RecordTurn", func(ctx context.Context) error { return w.st.RecordTurn(ctx, t) })
}

func (w *wrapped) FinishTurn(ctx context.Context, tenant, sessionID string, m engine.UIMessage, rec *TurnRecord) error {
	return call0(w, ctx, "FinishTurn", func(ctx context.Context) error { return w.st.FinishTurn(ctx, tenant, sessionID, m, rec) })
}

func (w *wrapped) Turns(ctx context.Context, tenant, sessionID string) ([]TurnRecord, error) {
	return call1(w, ctx, "Turns", func(ctx context.Context) ([]TurnRecord, error) { return w.st.Turns(ctx, tenant, sessionID) })
}

func (w *wrapped) CreateApprovals(ctx context.Context, as []Approval) error {
	return call0(w, ctx, "CreateApprovals", func(ctx context.Context) error { return w.st.CreateApprovals(ctx, as) })
}

func (w *wrapped) GetApproval(ctx context.Context, tenant, id string) (*Approval, error) {
	return call1(w, ctx, "GetApproval", func(ctx context.Context) (*Approval, error) { return w.st.GetApproval(ctx, tenant, id) })
}

func (w *wrapped) ListApprovals(ctx context.Context, tenant string, f ApprovalFilter) ([]Approval, error) {
	return call1(w, ctx, "ListApprovals", func(ctx context.Context) ([]Approval, error) { return w.st.ListApprovals(ctx, tenant, f) })
}

func (w *wrapped) CountPendingApprovals(ctx context.Context) (map[string]int, error) {
	return call1(w, ctx, "CountPendingApprovals", w.st.CountPendingApprovals)
}

func (w *wrapped) DecideApproval(ctx context.Context, tenant, id string, d Decision) (*Approval, *Submission, error) {
	return call2(w, ctx, "DecideApproval", func(ctx context.Context) (*Approval, *Submission, error) {
		return w.st.DecideApproval(ctx, tenant, id, d)
	})
}

func (w *wrapped) ExpireApprovals(ctx context.Context, at time.Time, resume Resume) ([]Approval, []Submission, error) {
	return call2(w, ctx, "ExpireApprovals", func(ctx context.Context) ([]Approval, []Submission, error) {
		return w.st.ExpireApprovals(ctx, at, resume)
	})
}

func (w *wrapped) JournalToolResult(ctx context.Context, r *ToolResult) error {
	return call0(w, ctx, "JournalToolResult", func(ctx context.Context) error { return w.st.JournalToolResult(ctx, r) })
}

func (w *wrapped) JournaledToolResult(ctx context.Context, k ToolCallKey, step, index int) (*ToolResult, error) {
	return call1(w, ctx, "JournaledToolResult", func(ctx context.Context) (*ToolResult, error) { return w.st.JournaledToolResult(ctx, k, step, index) })
}

func (w *wrapped) SessionState(ctx context.Context, tenant, sessionID string) (*SessionState, error) {
	return call1(w, ctx, "SessionState", func(ctx context.Context) (*SessionState, error) { return w.st.SessionState(ctx, tenant, sessionID) })
}

func (w *wrapped) PutContextBlock(ctx context.Context, tenant, sessionID, name, content string) error {
	return call0(w, ctx, "PutContextBlock", func(ctx context.Context) error { return w.st.PutContextBlock(ctx, tenant, sessionID, name, content) })
}

func (w *wrapped) AddCompaction(ctx context.Context, c *Compaction) error {
	return call0(w, ctx, "AddCompaction", func(ctx context.Context) error { return w.st.AddCompaction(ctx, c) })
}

func (w *wrapped) Compactions(ctx context.Context, tenant, sessionID string) ([]Compaction, error) {
	return call1(w, ctx, "Compactions", func(ctx context.Context) ([]Compaction, error) { return w.st.Compactions(ctx, tenant, sessionID) })
}

func (w *wrapped) SetLastInputTokens(ctx context.Context, tenant, sessionID string, tokens int) error {
	return call0(w, ctx, "SetLastInputTokens", func(ctx context.Context) error { return w.st.SetLastInputTokens(ctx, tenant, sessionID, tokens) })
}

func (w *wrapped) SearchMessages(ctx context.Context, tenant, sessionID, query string, limit int) ([]MessageHit, error) {
	return call1(w, ctx, "SearchMessages", func(ctx context.Context) ([]MessageHit, error) {
		return w.st.SearchMessages(ctx, tenant, sessionID, query, limit)
	})
}

func (x *wrappedRelay) AppendChunk(ctx context.Context, l *Lease, seq int64, frames []byte, done bool) error {
	return call0(x.wrapped, ctx, "AppendChunk", func(ctx context.Context) error { return x.relay.AppendChunk(ctx, l, seq, frames, done) })
}

func (x *wrappedRelay) FollowStream(ctx context.Context, tenant, sessionID string) (int64, bool, error) {
	return call2(x.wrapped, ctx, "FollowStream", func(ctx context.Context) (int64, bool, error) { return x.relay.FollowStream(ctx, tenant, sessionID) })
}

func (x *wrappedRelay) ReleaseUnfollowed(ctx context.Context, l *Lease) (bool, error) {
	return call1(x.wrapped, ctx, "ReleaseUnfollowed", func(ctx context.Context) (bool, error) { return x.relay.ReleaseUnfollowed(ctx, l) })
}

func (x *wrappedRelay) LiveStream(ctx context.Context, tenant, sessionID string) (int64, bool, error) {
	return call2(x.wrapped, ctx, "LiveStream", func(ctx context.Context) (int64, bool, error) { return x.relay.LiveStream(ctx, tenant, sessionID) })
}

func (x *wrappedRelay) ReadChunks(ctx context.Context, tenant, sessionID string, token, from int64, limit int) ([]Chunk, error) {
	return call1(x.wrapped, ctx, "ReadChunks", func(ctx context.Context) ([]Chunk, error) {
		return x.relay.ReadChunks(ctx, tenant, sessionID, token, from, limit)
	})
}

func (x *wrappedRelay) ReportRevision(ctx context.Context, r ReplicaRevision) error {
	return call0(x.wrapped, ctx, "ReportRevision", func(ctx context.Context) error { return x.relay.ReportRevision(ctx, r) })
}

func (x *wrappedRelay) ReplicaRevisions(ctx context.Context) ([]ReplicaRevision, error) {
	return call1(x.wrapped, ctx, "ReplicaRevisions", func(ctx context.Context) ([]ReplicaRevision, error) { return x.relay.ReplicaRevisions(ctx) })
}

func (x *wrappedRelay) SweepStreams(ctx context.Context, age time.Duration) (int, error) {
	return call1(x.wrapped, ctx, "SweepStreams", func(ctx context.Context) (int, error) { return x.relay.SweepStreams(ctx, age) })
}

func (x *wrappedRelay) Enqueue(ctx context.Context, tenant, sessionID, owner string, counted bool, bound int, ttl time.Duration) (*Waiter, error) {
	return call1(x.wrapped, ctx, "Enqueue", func(ctx context.Context) (*Waiter, error) {
		return x.relay.Enqueue(ctx, tenant, sessionID, owner, counted, bound, ttl)
	})
}

func (x *wrappedRelay) AcquireQueued(ctx context.Context, w *Waiter, ttl time.Duration) (*Lease, error) {
	return call1(x.wrapped, ctx, "AcquireQueued", func(ctx context.Context) (*Lease, error) { return x.relay.AcquireQueued(ctx, w, ttl) })
}

func (x *wrappedRelay) Dequeue(ctx context.Context, w *Waiter) error {
	return call0(x.wrapped, ctx, "Dequeue", func(ctx context.Context) error { return x.relay.Dequeue(ctx, w) })
}

func (x *wrappedRelay) RenewWaiters(ctx context.Context, ids []int64, ttl time.Duration) error {
	return call0(x.wrapped, ctx, "RenewWaiters", func(ctx context.Context) error { return x.relay.RenewWaiters(ctx, ids, ttl) })
}

func (x *wrappedRelay) SweepWaiters(ctx context.Context) (int, error) {
	return call1(x.wrapped, ctx, "SweepWaiters", func(ctx context.Context) (int, error) { return x.relay.SweepWaiters(ctx) })
}

func (w *wrapped) PutKillSwitch(ctx context.Context, k *KillSwitch) error {
	return call0(w, ctx, "PutKillSwitch", func(ctx context.Context) error { return w.st.PutKillSwitch(ctx, k) })
}

func (w *wrapped) KillSwitches(ctx context.Context, at time.Time) ([]KillSwitch, error) {
	return call1(w, ctx, "KillSwitches", func(ctx context.Context) ([]KillSwitch, error) { return w.st.KillSwitches(ctx, at) })
}

func (w *wrapped) LiftKillSwitch(ctx context.Context, id string) (*KillSwitch, error) {
	return call1(w, ctx, "LiftKillSwitch", func(ctx context.Context) (*KillSwitch, error) { return w.st.LiftKillSwitch(ctx, id) })
}

var (
	_ Store = (*wrapped)(nil)
	_ Relay = (*wrappedRelay)(nil)
)

func (w *wrapped) AdmitState(ctx context.Context, a *StateAdmission) ([]StateReading, error) {
	return call1(w, ctx, "AdmitState", func(ctx context.Context) ([]StateReading, error) {
		return w.st.AdmitState(ctx, a)
	})
}

func (w *wrapped) SettleState(ctx context.Context, st *StateSettlement) error {
	return call0(w, ctx, "SettleState", func(ctx context.Context) error {
		return w.st.SettleState(ctx, st)
	})
}

func (w *wrapped) PruneState(ctx context.Context, t time.Time, limit int) (int, error) {
	return call1(w, ctx, "PruneState", func(ctx context.Context) (int, error) {
		return w.st.PruneState(ctx, t, limit)
	})
}

func (w *wrapped) ListSessions(ctx context.Context, tenant, agent, after string, limit int) ([]Session, error) {
	return call1(w, ctx, "ListSessions", func(ctx context.Context) ([]Session, error) {
		return w.st.ListSessions(ctx, tenant, agent, after, limit)
	})
}

func (w *wrapped) IdleSessions(ctx context.Context, tenant, agent string, before time.Time, limit int) ([]Session, error) {
	return call1(w, ctx, "IdleSessions", func(ctx context.Context) ([]Session, error) {
		return w.st.IdleSessions(ctx, tenant, agent, before, limit)
	})
}

func (w *wrapped) ExportSession(ctx context.Context, tenant, id string) (*SessionData, error) {
	return call1(w, ctx, "ExportSession", func(ctx context.Context) (*SessionData, error) {
		return w.st.ExportSession(ctx, tenant, id)
	})
}

func (w *wrapped) EraseSession(ctx context.Context, tenant, id string, idleBefore time.Time) (*SessionData, error) {
	return call1(w, ctx, "EraseSession", func(ctx context.Context) (*SessionData, error) {
		return w.st.EraseSession(ctx, tenant, id, idleBefore)
	})
}
