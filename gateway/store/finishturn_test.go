package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

// assistant is a one-part assistant message.
func assistant(id, s string) engine.UIMessage {
	return engine.UIMessage{ID: id, Role: engine.RoleAssistant, Parts: []engine.UIPart{{Type: engine.PartText, Text: s}}}
}

func TestFinishTurn(t *testing.T) {
	rec := func(tenant, session string) *TurnRecord {
		return &TurnRecord{RequestID: "r1", Tenant: tenant, SessionID: session, Agent: "demo", Status: "completed",
			FinishReason: "stop", Usage: engine.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}
	}
	tests := []struct {
		name      string
		session   string // the session FinishTurn writes to
		msg       engine.UIMessage
		rec       *TurnRecord
		wantErr   error
		wantMsgs  []engine.UIMessage // the transcript of acme/s1 afterwards
		wantTurns int                // acme/<session>'s turn records afterwards
	}{
		{
			name:      "replaces the streamed message in place",
			session:   "s1",
			msg:       assistant("a1", "final answer"),
			rec:       rec("acme", "s1"),
			wantMsgs:  []engine.UIMessage{text("u1", "hi"), assistant("a1", "final answer"), text("u2", "and?")},
			wantTurns: 1,
		},
		{
			name:      "appends a new message",
			session:   "s1",
			msg:       assistant("a2", "second answer"),
			rec:       rec("acme", "s1"),
			wantMsgs:  []engine.UIMessage{text("u1", "hi"), assistant("a1", "partial"), text("u2", "and?"), assistant("a2", "second answer")},
			wantTurns: 1,
		},
		{
			name:     "missing session stores neither",
			session:  "nope",
			msg:      assistant("a1", "final answer"),
			rec:      rec("acme", "nope"),
			wantErr:  ErrNotFound,
			wantMsgs: []engine.UIMessage{text("u1", "hi"), assistant("a1", "partial"), text("u2", "and?")},
		},
		{
			name:     "record of another session",
			session:  "s1",
			msg:      assistant("a1", "final answer"),
			rec:      rec("acme", "s2"),
			wantErr:  ErrInvalid,
			wantMsgs: []engine.UIMessage{text("u1", "hi"), assistant("a1", "partial"), text("u2", "and?")},
		},
		{
			name:     "record of another tenant",
			session:  "s1",
			msg:      assistant("a1", "final answer"),
			rec:      rec("globex", "s1"),
			wantErr:  ErrInvalid,
			wantMsgs: []engine.UIMessage{text("u1", "hi"), assistant("a1", "partial"), text("u2", "and?")},
		},
		{
			name:     "message without an id",
			session:  "s1",
			msg:      assistant("", "final answer"),
			rec:      rec("acme", "s1"),
			wantErr:  ErrInvalid,
			wantMsgs: []engine.UIMessage{text("u1", "hi"), assistant("a1", "partial"), text("u2", "and?")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			forEachStore(t, func(t *testing.T, s Store) {
				mustSession(t, s, "acme", "s1")
				for _, m := range []engine.UIMessage{text("u1", "hi"), assistant("a1", "partial"), text("u2", "and?")} {
					if err := s.AppendMessage(ctx, "acme", "s1", m); err != nil {
						t.Fatal(err)
					}
				}
				err := s.FinishTurn(ctx, "acme", tt.session, tt.msg, tt.rec)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("FinishTurn: err = %v, want %v", err, tt.wantErr)
				}
				msgs, err := s.Messages(ctx, "acme", "s1")
				if err != nil {
					t.Fatal(err)
				}
				assertJSON(t, msgs, tt.wantMsgs)
				turns, err := s.Turns(ctx, "acme", tt.session)
				if err != nil {
					t.Fatal(err)
				}
				if len(turns) != tt.wantTurns {
					t.Fatalf("Turns = %+v, want %d", turns, tt.wantTurns)
				}
				if tt.wantTurns > 0 && (turns[0].RequestID != tt.rec.RequestID || turns[0].Usage != tt.rec.Usage) {
					t.Errorf("Turns[0] = %+v, want %+v", turns[0], *tt.rec)
				}
			})
		})
	}
}

// TestClosedStoreFails checks that the prepared statements are closed with
// the store: every call fails with an error instead of panicking.
func TestClosedStoreFails(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		mustSession(t, s, "acme", "s1")
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for name, call := range map[string]func() error{
			"GetSession":  func() error { _, err := s.GetSession(ctx, "acme", "s1"); return err },
			"Messages":    func() error { _, err := s.Messages(ctx, "acme", "s1"); return err },
			"SetLastBody": func() error { return s.SetLastBody(ctx, "acme", "s1", nil) },
			"RecordTurn":  func() error { return s.RecordTurn(ctx, &TurnRecord{RequestID: "r", Tenant: "acme", SessionID: "s1"}) },
			"AppendMessage": func() error {
				return s.AppendMessage(ctx, "acme", "s1", text("m", "x"))
			},
		} {
			if err := call(); err == nil {
				t.Errorf("%s on a closed store succeeded", name)
			}
		}
	})
}

// BenchmarkFinishTurn compares the end of a turn as one transaction with
// the two calls it replaces.
func BenchmarkFinishTurn(b *testing.B) {
	now := time.Now()
	rec := &TurnRecord{RequestID: "r", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "completed", FinishReason: "stop",
		Usage: engine.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}, RuleRevision: "sha256:abc",
		StartedAt: now, FinishedAt: now}
	for _, bb := range []struct {
		name   string
		finish func(s Store, m engine.UIMessage) error
	}{
		{"one transaction", func(s Store, m engine.UIMessage) error {
			return s.FinishTurn(context.Background(), "acme", "s1", m, rec)
		}},
		{"UpsertMessage then RecordTurn", func(s Store, m engine.UIMessage) error {
			if err := s.UpsertMessage(context.Background(), "acme", "s1", m); err != nil {
				return err
			}
			return s.RecordTurn(context.Background(), rec)
		}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			benchEachDB(b, func(b *testing.B, db testDB) {
				s := open(b, db)
				mustSession(b, s, "acme", "s1")
				m := assistant("", "It will rain in Paris this afternoon; take an umbrella.")
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					m.ID = fmt.Sprint(i)
					if err := bb.finish(s, m); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestFinishTurnReleases: a FinishTurn asked to release its lease
// (WithRelease) stores the message and the record and releases the lease
// in one write, all or nothing: under a lost lease it stores nothing and
// leaves the new holder's lease alone, and on a missing session it keeps
// its lease. On PostgreSQL a lease a reader follows is left to the relay,
// and a release wakes the session's live waiters, and only then.
func TestFinishTurnReleases(t *testing.T) {
	for _, tt := range []struct {
		name string
		// missing: the session has no row; lost: another replica took the
		// session over; followed: a reader on another replica follows the
		// stream (PostgreSQL only); waiter: a live waiter queues for the
		// lease (on PostgreSQL).
		missing, lost, followed, waiter bool
		wantErr                         error
		wantReleased                    bool // the finish released the lease
	}{
		{name: "released, nobody to wake", wantReleased: true},
		{name: "released, its waiter woken", waiter: true, wantReleased: true},
		{name: "followed: left to the relay", followed: true, waiter: true},
		{name: "lost lease: fenced", lost: true, waiter: true, wantErr: ErrFenced},
		{name: "missing session: the lease kept", missing: true, waiter: true, wantErr: ErrNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			forEachDB(t, func(t *testing.T, db testDB) {
				pg := db.driver() == "postgres"
				if tt.followed && !pg {
					t.Skip("a reader follows a stream of another replica on PostgreSQL only")
				}
				ctx := context.Background()
				a, b := replicaPair(t, db)
				if !tt.missing {
					mustSession(t, a, "acme", "s1")
				}
				var notes <-chan int64
				if pg {
					notes = leaseNotes(t, b.(*Postgres))
				}
				ttl := testClaimTTL
				if tt.lost {
					ttl = time.Millisecond
				}
				l, err := a.AcquireLease(ctx, "acme", "s1", "ra", ttl)
				if err != nil {
					t.Fatal(err)
				}
				current := l // the session's lease when the finish runs
				if tt.lost {
					current = takeOver(t, b, l, "rb")
				}
				if tt.followed {
					if _, ok, err := b.(*Postgres).FollowStream(ctx, "acme", "s1"); err != nil || !ok {
						t.Fatalf("FollowStream = %v, %v", ok, err)
					}
				}
				if tt.waiter && pg {
					mustEnqueue(t, b.(*Postgres), "s1", "rb", false, 1, time.Hour)
				}

				var released bool
				rec := &TurnRecord{RequestID: "r1", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "completed"}
				err = a.FinishTurn(WithRelease(ctx, l, &released), "acme", "s1", assistant("a1", "done"), rec)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("FinishTurn: err = %v, want %v", err, tt.wantErr)
				}
				if released != tt.wantReleased {
					t.Errorf("released = %v, want %v", released, tt.wantReleased)
				}
				stored := 0
				if tt.wantErr == nil {
					stored = 1
				}
				for _, table := range []string{"messages", "turns"} {
					if got := queryInt(t, b, "SELECT COUNT(*) FROM "+table); got != stored {
						t.Errorf("%d rows in %s, want %d", got, table, stored)
					}
				}
				var wantRenew error // the lease lives on
				if tt.wantReleased {
					wantRenew = ErrLeaseReleased
				}
				if _, err := b.RenewLease(ctx, current, testClaimTTL); !errors.Is(err, wantRenew) {
					t.Errorf("RenewLease of the session's lease after the finish: err = %v, want %v", err, wantRenew)
				}
				if !pg {
					return
				}
				// A notification of token -1 after the finish's ends what
				// is checked: notifications arrive in the order their
				// transactions committed.
				execSQL(t, b, fmt.Sprintf(`SELECT pg_notify('%s', '%s')`, ChannelLease, b.(*Postgres).payload("acme", "s1", -1)))
				want := []int64{-1}
				if tt.wantReleased && tt.waiter {
					want = []int64{l.Token, -1}
				}
				expectNotes(t, notes, want...)
			})
		})
	}
}
