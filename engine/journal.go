package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
)

// ToolJournal keeps the outcomes of a turn's executed tool calls, so that a
// re-run of the turn (a durable submission run again after its process
// died) reuses a completed call's outcome instead of calling the tool a
// second time. The engine records each server tool call's outcome as soon as
// the tool returns — before the turn's next model step — and, before running
// a call, looks it up: a call journaled under the same tool call id, or at
// the same position (step and index in the step) when the model named it
// anew, with the same tool and input, is not run again. Lookup and Record are called concurrently from the
// step's tool goroutines. A journal that cannot read answers false (the tool
// runs: at least once); one that cannot write only loses the reuse.
type ToolJournal interface {
	// Lookup returns the journaled outcome of call, or false.
	Lookup(ctx context.Context, call JournalCall) (JournalEntry, bool)
	// Record journals the outcome of call.
	Record(ctx context.Context, call JournalCall, entry JournalEntry)
}

// JournalCall is the tool call a ToolJournal entry is for, in its turn
// (TurnRequest.Identity).
type JournalCall struct {
	ToolCallID string
	// Step is the call's step number and Index its place among the step's
	// calls: a re-run's model may name the same call with a new id.
	Step, Index int
	ToolName    string
	// Input is the input the tool runs with (after a beforeToolCall rewrite).
	Input json.RawMessage
}

// JournalEntry is the outcome of one tool execution: the tool's output, or
// the text of the error it failed with (what afterToolCall records; the
// model is told a generic text).
type JournalEntry struct {
	Output json.RawMessage
	Error  string
}

// IdempotencyKey returns the key a tool backend can deduplicate the call
// toolCallID of the turn id by: the hex SHA-256 of the tenant, session,
// request id and tool call id (each length-prefixed, so no two different
// tuples encode alike). A submission's re-runs share its request id, and a
// model that repeats the call repeats its id, so a call interrupted by a
// crash is retried under the same key, on any replica; calls of different
// tenants, sessions or requests never share one.
func IdempotencyKey(id Identity, toolCallID string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range []string{"turngate.tool-call.v1", id.Principal.Tenant, id.SessionID, id.RequestID, toolCallID} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// replayJournaled fills cs from the journal when its call already ran in an
// earlier run of the turn; it reports whether it did.
func (t *turn) replayJournaled(ctx context.Context, cs *callState) bool {
	if t.req.Journal == nil {
		return false
	}
	e, ok := t.req.Journal.Lookup(ctx, t.journalCall(cs))
	if !ok {
		return false
	}
	cs.executed = true
	if e.Error != "" {
		cs.err, cs.errStage = errors.New(e.Error), StageTool
		return true
	}
	cs.output, cs.success = orNull(e.Output), true
	return true
}

// journal records cs's outcome, unless the turn ended while the tool ran
// (an abort or shutdown: the call's outcome is then unknown, and a re-run
// runs it again).
func (t *turn) journal(ctx context.Context, cs *callState) {
	if t.req.Journal == nil || ctx.Err() != nil {
		return
	}
	e := JournalEntry{Output: cs.output}
	if cs.err != nil {
		e = JournalEntry{Error: cs.err.Error()}
	}
	t.req.Journal.Record(ctx, t.journalCall(cs), e)
}

func (t *turn) journalCall(cs *callState) JournalCall {
	return JournalCall{ToolCallID: cs.call.ToolCallID, Step: cs.step, Index: cs.index, ToolName: cs.call.ToolName, Input: cs.effective}
}
