package erasure

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/golden"
)

// fullSession is a session with an item of every kind, each field set
// (the store's own fields too: tenant, agents, principal, relay batches,
// which the export leaves out), beside items whose optional fields are
// empty: a pending approval without approvers, a failed tool call, a
// queued submission, a running turn.
func fullSession() *store.SessionData {
	at := func(s int) time.Time { return time.Date(2026, 12, 3, 10, 0, s, 0, time.UTC) }
	return &store.SessionData{
		Session: store.Session{ID: "s1", Tenant: "acme", Agent: "demo", LastBody: json.RawMessage(`{"locale":"fr"}`),
			CreatedAt: at(0), UpdatedAt: at(9)},
		Messages: []json.RawMessage{
			json.RawMessage(`{"id":"m1","role":"user","parts":[{"type":"text","text":"hi"},{"type":"file","mediaType":"image/png","url":"data:image/png;base64,AAAA"}]}`),
			json.RawMessage(`{"id":"m2","role":"assistant","parts":[{"type":"text","text":"hello"}]}`),
		},
		Blocks: []store.ContextBlock{{Name: "notes", Content: "likes tea", UpdatedAt: at(1)}},
		Compactions: []store.Compaction{{Tenant: "acme", SessionID: "s1", ThroughMessageID: "m1", MessageCount: 1,
			Summary: "greeted", Reason: store.CompactThreshold, InputTokens: 900, Model: "small", CreatedAt: at(2)}},
		LastInputTokens: 321,
		Approvals: []store.Approval{
			{ID: "ap1", Tenant: "acme", SessionID: "s1", Agent: "demo", RequestID: "r1", MessageID: "m2", ToolCallID: "c1",
				ToolName: "refund", Input: json.RawMessage(`{"amount":5}`), Reasons: json.RawMessage(`[{"reason":"money"}]`),
				Approvers: []string{"role:finance"}, Principal: json.RawMessage(`{"subject":"alice"}`),
				State: store.ApprovalDenied, DecidedBy: "bob", Reason: "no", RequestedAt: at(3), ExpiresAt: at(50), DecidedAt: at(4)},
			{ID: "ap2", Tenant: "acme", SessionID: "s1", Agent: "demo", RequestID: "r1", MessageID: "m2", ToolCallID: "c2",
				ToolName: "refund", Input: json.RawMessage(`{"amount":6}`), Reasons: json.RawMessage(`[]`),
				State: store.ApprovalPending, RequestedAt: at(3), ExpiresAt: at(50)},
		},
		ToolResults: []store.ToolResult{
			{ToolCallKey: store.ToolCallKey{Tenant: "acme", SessionID: "s1", RequestID: "r1", ToolCallID: "c0"}, Step: 1, CallIndex: 0,
				ToolName: "lookup", InputSHA256: "ab12", Output: json.RawMessage(`{"ok":true}`), CreatedAt: at(5)},
			{ToolCallKey: store.ToolCallKey{Tenant: "acme", SessionID: "s1", RequestID: "r1", ToolCallID: "c3"}, Step: 2, CallIndex: 1,
				ToolName: "lookup", InputSHA256: "cd34", Error: "timeout", CreatedAt: at(6)},
		},
		Submissions: []store.Submission{
			{ID: "sub1", Tenant: "acme", SessionID: "s1", Agent: "demo", IdempotencyKey: "k1", Request: json.RawMessage(`{"messages":[]}`),
				Status: store.StatusCompleted, Result: json.RawMessage(`{"status":"completed"}`), Attempts: 2, CreatedAt: at(7), UpdatedAt: at(8)},
			{ID: "sub2", Tenant: "acme", SessionID: "s1", Agent: "demo", Request: json.RawMessage(`{"messages":[]}`),
				Status: store.StatusQueued, CreatedAt: at(8), UpdatedAt: at(8)},
		},
		Turns: []store.TurnRecord{
			{RequestID: "r1", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "completed", FinishReason: "stop",
				Usage:        engine.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, ReasoningTokens: 2, CachedInputTokens: 1},
				RuleRevision: "sha256:aa", StartedAt: at(3), FinishedAt: at(6)},
			{RequestID: "r2", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "error", Error: "upstream failed",
				RuleRevision: "sha256:aa", StartedAt: at(7)},
		},
		Decisions: []json.RawMessage{
			json.RawMessage(`{"kind":"beforeTurn","sessionId":"s1","requestId":"r1","input":{"text":"hi"},"outcome":"allow"}`),
		},
		RelayBatches: 4,
	}
}

// TestDocument pins the export document (GET …/sessions/{id}/export) and
// the tombstone's hashes of it, for a session with every kind of item and
// for one with none (every list is [], never null).
func TestDocument(t *testing.T) {
	for _, tc := range []struct {
		name string
		data *store.SessionData
	}{
		{"full", fullSession()},
		{"empty", &store.SessionData{Session: store.Session{ID: "s0", Tenant: "acme", Agent: "demo",
			CreatedAt: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := NewDocument(tc.data)
			body, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			golden.CheckJSON(t, "testdata/export_"+tc.name+".json", body)
			erased, err := json.Marshal(Erased(doc))
			if err != nil {
				t.Fatal(err)
			}
			golden.CheckJSON(t, "testdata/erased_"+tc.name+".json", erased)
		})
	}
}
