package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

// fillSession stores one of everything a session can hold: messages (one
// with a file), a context block, a compaction, input tokens, an approval,
// a journaled tool result, a queued submission and a turn record.
func fillSession(t *testing.T, s Store, tenant, id string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.GetOrCreateSession(ctx, tenant, "demo", id)
	must(err)
	must(s.AppendMessage(ctx, tenant, id, engine.UIMessage{ID: "u1", Role: "user", Parts: []engine.UIPart{
		{Type: "text", Text: "my card is 4111"},
		{Type: "file", MediaType: "text/plain", Filename: "note.txt", URL: "data:text/plain;base64,aGVsbG8="},
	}}))
	must(s.AppendMessage(ctx, tenant, id, engine.UIMessage{ID: "a1", Role: "assistant", Parts: []engine.UIPart{{Type: "text", Text: "noted"}}}))
	must(s.PutContextBlock(ctx, tenant, id, "memory", "likes tea"))
	must(s.AddCompaction(ctx, &Compaction{Tenant: tenant, SessionID: id, ThroughMessageID: "u1", MessageCount: 1,
		Summary: "the card", Reason: CompactThreshold, InputTokens: 10, Model: "fast"}))
	must(s.SetLastInputTokens(ctx, tenant, id, 42))
	must(s.CreateApprovals(ctx, []Approval{testApproval("ap-"+tenant+"-"+id, tenant, id, now(), time.Hour)}))
	must(s.JournalToolResult(ctx, &ToolResult{ToolCallKey: ToolCallKey{Tenant: tenant, SessionID: id, RequestID: "r1", ToolCallID: "c1"},
		ToolName: "search", InputSHA256: "ab", Output: json.RawMessage(`{"hits":1}`)}))
	_, _, err = s.CreateSubmission(ctx, &Submission{Tenant: tenant, SessionID: id, Agent: "demo", Request: json.RawMessage(`{"text":"later"}`)}, QueueLimits{})
	must(err)
	must(s.RecordTurn(ctx, &TurnRecord{RequestID: "r1", Tenant: tenant, SessionID: id, Agent: "demo", Status: "completed",
		StartedAt: now(), FinishedAt: now()}))
	must(s.InsertDecisions(ctx, []DecisionRow{{Time: now(), Tenant: tenant, Agent: "demo", SessionID: id, RequestID: "r1",
		Hook: "beforeTurn", Outcome: "allow", RulesFired: []string{"card"},
		Record: json.RawMessage(`{"hook":"beforeTurn","input":{"text":"my card is 4111"}}`)}}))
}

// sessionRows counts the rows of every table that holds the tenant's
// session's data, read from the database itself.
func sessionRows(t *testing.T, s Store, tenant, id string) map[string]int {
	t.Helper()
	pk := fmt.Sprintf(`(SELECT pk FROM sessions WHERE tenant = '%s' AND id = '%s')`, tenant, id)
	byID := fmt.Sprintf(`tenant = '%s' AND session_id = '%s'`, tenant, id)
	out := map[string]int{
		"sessions":       queryInt(t, s, fmt.Sprintf(`SELECT COUNT(*) FROM sessions WHERE tenant = '%s' AND id = '%s'`, tenant, id)),
		"messages":       queryInt(t, s, `SELECT COUNT(*) FROM messages WHERE session_pk = `+pk),
		"submissions":    queryInt(t, s, fmt.Sprintf(`SELECT COUNT(*) FROM submissions WHERE tenant = '%s' AND session_id = '%s'`, tenant, id)),
		"context_blocks": queryInt(t, s, `SELECT COUNT(*) FROM context_blocks WHERE `+byID),
		"compactions":    queryInt(t, s, `SELECT COUNT(*) FROM compactions WHERE `+byID),
		"session_usage":  queryInt(t, s, `SELECT COUNT(*) FROM session_usage WHERE `+byID),
		"approvals":      queryInt(t, s, `SELECT COUNT(*) FROM approvals WHERE `+byID),
		"tool_results":   queryInt(t, s, `SELECT COUNT(*) FROM tool_results WHERE `+byID),
		"turns":          queryInt(t, s, `SELECT COUNT(*) FROM turns WHERE `+byID),
		"decisions":      queryInt(t, s, `SELECT COUNT(*) FROM decisions WHERE `+byID),
		"decision_rules": queryInt(t, s, `SELECT COUNT(*) FROM decision_rules WHERE decision_id IN (SELECT id FROM decisions WHERE `+byID+`)`),
	}
	if _, ok := s.(*Postgres); ok {
		out["stream_chunks"] = queryInt(t, s, `SELECT COUNT(*) FROM stream_chunks WHERE `+byID)
	}
	return out
}

// TestEraseSession erases a session on both drivers: the export first
// holds everything, the erasure returns the same, and afterwards no table
// holds a row of the session, while the tenant's other session and another
// tenant's session of the same id are untouched. The id can be used again,
// empty.
func TestEraseSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		fillSession(t, s, "t1", "s1")
		fillSession(t, s, "t1", "s2")
		fillSession(t, s, "t2", "s1")
		if pg, ok := s.(*Postgres); ok {
			l := &Lease{Tenant: "t1", SessionID: "s1", Token: 1}
			if _, err := pg.pool.Exec(ctx, `INSERT INTO stream_chunks (tenant, session_id, token, seq, frames, created_at)
				VALUES ('t1', 's1', 1, 0, 'x', 0)`); err != nil {
				t.Fatal(err, l)
			}
		}
		exp, err := s.ExportSession(ctx, "t1", "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(exp.Messages) != 2 || !strings.Contains(string(exp.Messages[0]), "data:text/plain;base64,aGVsbG8=") ||
			len(exp.Blocks) != 1 || len(exp.Compactions) != 1 || exp.LastInputTokens != 42 || len(exp.Approvals) != 1 ||
			len(exp.ToolResults) != 1 || exp.ToolResults[0].RequestID != "r1" || len(exp.Submissions) != 1 || len(exp.Turns) != 1 ||
			len(exp.Decisions) != 1 || !strings.Contains(string(exp.Decisions[0]), "my card is 4111") {
			t.Fatalf("export = %+v", exp)
		}
		if _, err := s.ExportSession(ctx, "t3", "s1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("another tenant's export: %v, want ErrNotFound", err)
		}
		if _, err := s.Messages(ctx, "t1", "s1"); err != nil { // fill the cache
			t.Fatal(err)
		}
		got, err := s.EraseSession(ctx, "t1", "s1", time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		exp.RelayBatches = got.RelayBatches
		if a, b := fmt.Sprintf("%+v", exp), fmt.Sprintf("%+v", got); a != b {
			t.Errorf("the erasure returned\n%s\nthe export held\n%s", b, a)
		}
		if _, ok := s.(*Postgres); ok && got.RelayBatches != 1 {
			t.Errorf("relay batches erased = %d, want 1", got.RelayBatches)
		}
		if _, ok := s.(*SQLite); ok {
			// The search index's rows of the three sessions' "card".
			if n := queryInt(t, s, `SELECT COUNT(*) FROM message_search WHERE text MATCH 'card'`); n != 2 {
				t.Errorf("the search index holds %d messages with card, want the other sessions' 2", n)
			}
		}
		for table, n := range sessionRows(t, s, "t1", "s1") {
			if n != 0 {
				t.Errorf("after the erasure, %s holds %d rows of the session", table, n)
			}
		}
		if n := queryInt(t, s, `SELECT COUNT(*) FROM decision_rules WHERE decision_id NOT IN (SELECT id FROM decisions)`); n != 0 {
			t.Errorf("after the erasure, decision_rules holds %d rows of erased decisions", n)
		}
		for _, k := range [][2]string{{"t1", "s2"}, {"t2", "s1"}} {
			for table, n := range sessionRows(t, s, k[0], k[1]) {
				if n == 0 && table != "stream_chunks" {
					t.Errorf("the erasure of t1/s1 emptied %s of %s/%s", table, k[0], k[1])
				}
			}
		}
		if _, err := s.Messages(ctx, "t1", "s1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Messages after the erasure: %v, want ErrNotFound", err)
		}
		if _, err := s.EraseSession(ctx, "t1", "s1", time.Time{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("a second erasure: %v, want ErrNotFound", err)
		}
		if _, _, err := s.GetOrCreateSession(ctx, "t1", "demo", "s1"); err != nil {
			t.Fatal(err)
		}
		if msgs, err := s.Messages(ctx, "t1", "s1"); err != nil || len(msgs) != 0 {
			t.Errorf("the session made again holds %d messages, %v", len(msgs), err)
		}
	})
}

// TestEraseSessionIsOneTransaction makes the erasure's last delete fail
// (a trigger refuses it) and finds every row of the session still there:
// nothing is half erased.
func TestEraseSessionIsOneTransaction(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		fillSession(t, s, "t1", "s1")
		before := sessionRows(t, s, "t1", "s1")
		if _, ok := s.(*SQLite); ok {
			execSQL(t, s, `CREATE TRIGGER refuse BEFORE DELETE ON sessions BEGIN SELECT RAISE(ABORT, 'refused'); END`)
		} else {
			execSQL(t, s, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END; $$`)
			execSQL(t, s, `CREATE TRIGGER refuse BEFORE DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION refuse()`)
		}
		if _, err := s.EraseSession(context.Background(), "t1", "s1", time.Time{}); err == nil {
			t.Fatal("the erasure succeeded though its last delete was refused")
		}
		if after := sessionRows(t, s, "t1", "s1"); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("after a failed erasure the rows are %v, were %v", after, before)
		}
		if msgs, err := s.Messages(context.Background(), "t1", "s1"); err != nil || len(msgs) != 2 {
			t.Errorf("after a failed erasure Messages = %d, %v", len(msgs), err)
		}
	})
}

// TestIdleSessions lists the sessions idle since a time, and erases one
// only while it is still idle.
func TestIdleSessions(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for _, k := range [][2]string{{"t1", "old"}, {"t2", "old"}} {
			if _, _, err := s.GetOrCreateSession(ctx, k[0], "demo", k[1]); err != nil {
				t.Fatal(err)
			}
		}
		cut := now()
		time.Sleep(time.Millisecond)
		if _, _, err := s.GetOrCreateSession(ctx, "t1", "demo", "new"); err != nil {
			t.Fatal(err)
		}
		idle, err := s.IdleSessions(ctx, "", "", cut, 10)
		if err != nil || len(idle) != 2 || idle[0].ID != "old" || idle[1].ID != "old" {
			t.Fatalf("idle sessions = %+v, %v", idle, err)
		}
		if idle, err := s.IdleSessions(ctx, "t1", "demo", cut, 10); err != nil || len(idle) != 1 || idle[0].Tenant != "t1" {
			t.Fatalf("t1's idle sessions = %+v, %v", idle, err)
		}
		if idle, err := s.IdleSessions(ctx, "t1", "other", cut, 10); err != nil || len(idle) != 0 {
			t.Errorf("another agent's idle sessions = %+v, %v", idle, err)
		}
		if _, err := s.EraseSession(ctx, "t1", "new", cut); !errors.Is(err, ErrConflict) {
			t.Errorf("erasing an active session as idle: %v, want ErrConflict", err)
		}
		if _, err := s.EraseSession(ctx, "t1", "old", cut); err != nil {
			t.Errorf("erasing an idle session: %v", err)
		}
		if _, err := s.IdleSessions(ctx, "", "", cut, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("a page of 0: %v, want ErrInvalid", err)
		}
	})
}

// TestListSessions pages a tenant's sessions of one agent by id.
func TestListSessions(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for _, k := range [][3]string{{"t1", "demo", "c"}, {"t1", "demo", "a"}, {"t1", "demo", "b"}, {"t1", "other", "d"}, {"t2", "demo", "e"}} {
			if _, _, err := s.GetOrCreateSession(ctx, k[0], k[1], k[2]); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		after := ""
		for {
			page, err := s.ListSessions(ctx, "t1", "demo", after, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range page {
				ids = append(ids, p.ID)
			}
			if len(page) < 2 {
				break
			}
			after = page[len(page)-1].ID
		}
		if got := strings.Join(ids, ","); got != "a,b,c" {
			t.Errorf("t1's demo sessions = %s, want a,b,c", got)
		}
	})
}

// TestErasedOnEveryReplica erases a session on one PostgreSQL replica
// while another caches its transcript: the other drops it on
// ChannelErased, reads it as not found, and empties its cache whenever its
// listener (re)starts, so a notification missed while it was down leaves
// nothing erased behind.
func TestErasedOnEveryReplica(t *testing.T) {
	db := freshPostgres(t)
	a, b := open(t, db).(*Postgres), open(t, db).(*Postgres)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Notification, 8)
	ready := make(chan struct{})
	go func() { _ = b.Listen(ctx, func() { close(ready) }, func(n Notification) { got <- n }) }()
	<-ready
	fillSession(t, a, "t1", "s1")
	if msgs, err := b.Messages(ctx, "t1", "s1"); err != nil || len(msgs) != 2 {
		t.Fatalf("b reads %d messages, %v", len(msgs), err)
	}
	if b.cache.len() != 1 {
		t.Fatalf("b caches %d transcripts, want 1", b.cache.len())
	}
	if _, err := a.EraseSession(ctx, "t1", "s1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for n := range got {
		if n.Channel == ChannelErased && n.Tenant == "t1" && n.SessionID == "s1" {
			break
		}
	}
	if b.cache.len() != 0 {
		t.Errorf("b still caches the erased transcript")
	}
	if _, err := b.Messages(ctx, "t1", "s1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("b reads the erased session: %v, want ErrNotFound", err)
	}
	// A listener that stops (its connection broke, or it was told to)
	// empties the cache: notifications it misses cannot leave an erased
	// transcript there.
	if _, err := b.Messages(ctx, "t1", "s2"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	fillSession(t, a, "t1", "s3")
	if _, err := b.Messages(ctx, "t1", "s3"); err != nil || b.cache.len() != 1 {
		t.Fatalf("b caches %d transcripts, %v", b.cache.len(), err)
	}
	stopped, listening := make(chan struct{}), make(chan struct{})
	lctx, lcancel := context.WithCancel(context.Background())
	go func() { _ = b.Listen(lctx, func() { close(listening) }, func(Notification) {}); close(stopped) }()
	<-listening
	lcancel()
	<-stopped
	if b.cache.len() != 0 {
		t.Errorf("a listener's start left %d transcripts cached", b.cache.len())
	}
}

// TestEraseDecisions: EraseDecisions deletes one session's records in the
// decision store, and only them (the session's other data stays); a
// second call finds nothing and is no error.
func TestEraseDecisions(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for _, k := range [][2]string{{"t1", "s1"}, {"t1", "s2"}, {"t2", "s1"}} {
			fillSession(t, s, k[0], k[1])
		}
		for range 2 {
			if err := s.EraseDecisions(ctx, "t1", "s1"); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			tenant, session string
			decisions       int
		}{{"t1", "s1", 0}, {"t1", "s2", 1}, {"t2", "s1", 1}} {
			d, err := s.ExportSession(ctx, tc.tenant, tc.session)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Decisions) != tc.decisions || len(d.Messages) != 2 {
				t.Errorf("%s/%s holds %d decisions and %d messages, want %d and 2", tc.tenant, tc.session, len(d.Decisions), len(d.Messages), tc.decisions)
			}
		}
	})
}
