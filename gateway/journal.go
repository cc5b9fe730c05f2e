package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
)

// toolJournal is the engine's ToolJournal on the store: a turn's executed
// tool calls are journaled under its tenant, session and request id, which
// every run of a durable submission shares, so a submission re-run after a
// crash (on this replica or another) reuses the outcomes of the calls its
// crashed run completed.
type toolJournal struct {
	st     store.Store
	log    *slog.Logger
	tenant string
	sessID string
	reqID  string
	// lost ends the turn as fenced when a journal write finds the
	// session's lease lost (nil when the turn runs under no lease).
	lost func()
	// failed ends the turn as an error when a journal write failed
	// otherwise (see writeFailure).
	failed *writeFailure
}

// writeFailure ends a turn when one of its writes during the run failed:
// it keeps the first error and cancels the turn with it.
type writeFailure struct {
	once   sync.Once
	err    error
	cancel context.CancelCauseFunc
}

func (f *writeFailure) fail(err error) {
	f.once.Do(func() {
		f.err = err
		f.cancel(err)
	})
}

// failure returns the error fail recorded, nil when none; call it once the
// turn has ended.
func (f *writeFailure) failure() error {
	f.once.Do(func() {}) // orders the read after a fail that ran
	return f.err
}

// journalFor returns the journal of in's turn when it runs a durable
// submission, the one kind of turn the gateway runs again after a crash
// (under the same request id, which the gateway made); nil otherwise, so
// chat turns pay no journal write per tool call.
func (s *Server) journalFor(in *turnInput, failed *writeFailure) engine.ToolJournal {
	if in.entry != engine.EntrySubmitMessages || in.ephemeral {
		return nil
	}
	j := &toolJournal{st: s.store, log: s.log, tenant: in.principal.Tenant, sessID: in.sessionID, reqID: in.requestID, failed: failed}
	if h := in.holding; h != nil {
		j.lost = func() { h.cancel(store.ErrFenced) }
	}
	return j
}

func (j *toolJournal) key(id string) store.ToolCallKey {
	return store.ToolCallKey{Tenant: j.tenant, SessionID: j.sessID, RequestID: j.reqID, ToolCallID: id}
}

// inputHash is the hex SHA-256 of a tool call's input.
func inputHash(input []byte) string {
	h := sha256.Sum256(input)
	return hex.EncodeToString(h[:])
}

// Lookup implements engine.ToolJournal: the entry of the call's id, or of
// its position when the re-run's model named it anew, counts only for the
// same tool and input, so another call under a reused id or position runs. A
// store error is logged and the call runs (at least once).
func (j *toolJournal) Lookup(ctx context.Context, c engine.JournalCall) (engine.JournalEntry, bool) {
	r, err := j.st.JournaledToolResult(ctx, j.key(c.ToolCallID), c.Step, c.Index)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			j.log.Error("reading the tool journal; the call runs", "requestId", j.reqID, "toolCallId", c.ToolCallID, "err", err)
		}
		return engine.JournalEntry{}, false
	}
	if r.ToolName != c.ToolName || r.InputSHA256 != inputHash(c.Input) {
		return engine.JournalEntry{}, false
	}
	return engine.JournalEntry{Output: r.Output, Error: r.Error}, true
}

// Record implements engine.ToolJournal. The write, a replace by key, is
// tried again while the store is unavailable (store.RetryWrite). A write
// refused because the session's lease was lost (another replica took the
// session, and may re-run the submission) ends the turn at once, as a lost
// renewal does: it stores nothing and ends as an error. A write that
// still fails ends the turn as an error too (the submission runs again,
// and the call whose outcome was not journaled with it): a turn goes on
// only while its executed calls are journaled.
func (j *toolJournal) Record(ctx context.Context, c engine.JournalCall, e engine.JournalEntry) {
	ctx = context.WithoutCancel(ctx)
	r := &store.ToolResult{
		ToolCallKey: j.key(c.ToolCallID),
		Step:        c.Step,
		CallIndex:   c.Index,
		ToolName:    c.ToolName,
		InputSHA256: inputHash(c.Input),
		Output:      e.Output,
		Error:       e.Error,
	}
	err := store.RetryWrite(ctx, true, func() error { return j.st.JournalToolResult(ctx, r) })
	switch {
	case errors.Is(err, store.ErrFenced) && j.lost != nil:
		j.log.Warn("session lease lost while journaling a tool result; the turn ends as an error", "requestId", j.reqID, "toolCallId", c.ToolCallID)
		j.lost()
	case err != nil:
		j.log.Error("journaling a tool result failed; the turn ends as an error", "requestId", j.reqID, "toolCallId", c.ToolCallID, "err", err)
		if j.failed != nil {
			j.failed.fail(err)
		}
	}
}
