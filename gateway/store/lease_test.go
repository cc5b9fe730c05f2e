package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

// replicaPair opens two stores on db as two replicas would: on PostgreSQL
// two stores on one database; on SQLite, whose file serves one process and
// whose leases live in it, the same store twice.
func replicaPair(t *testing.T, db testDB) (a, b Store) {
	t.Helper()
	a = open(t, db)
	if db.driver() == "sqlite" {
		return a, a
	}
	return a, open(t, db)
}

// expire makes l lapse: it waits until its expiry has passed (its ttl is a
// millisecond).
func expire(l *Lease) {
	time.Sleep(time.Until(l.Expires) + time.Millisecond)
}

// takeOver acquires the session of l for owner once l has lapsed.
func takeOver(t *testing.T, s Store, l *Lease, owner string) *Lease {
	t.Helper()
	for {
		expire(l)
		l2, err := s.AcquireLease(context.Background(), l.Tenant, l.SessionID, owner, testClaimTTL)
		if errors.Is(err, ErrLeaseHeld) {
			continue // the two clocks (this process's, the server's) disagree by a little
		}
		if err != nil {
			t.Fatalf("AcquireLease after expiry: %v", err)
		}
		return l2
	}
}

func TestLeaseOneHolder(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		a, b := replicaPair(t, db)
		ctx := context.Background()
		l1, err := a.AcquireLease(ctx, "acme", "s1", "r1", testClaimTTL)
		if err != nil {
			t.Fatal(err)
		}
		for _, owner := range []string{"r2", "r1"} { // not reentrant either
			if _, err := b.AcquireLease(ctx, "acme", "s1", owner, testClaimTTL); !errors.Is(err, ErrLeaseHeld) {
				t.Errorf("second acquisition by %s: err = %v, want ErrLeaseHeld", owner, err)
			}
		}
		// Another session, and the same id of another tenant, are free.
		for _, k := range [][2]string{{"acme", "s2"}, {"globex", "s1"}} {
			if _, err := b.AcquireLease(ctx, k[0], k[1], "r2", testClaimTTL); err != nil {
				t.Errorf("lease of %v: %v", k, err)
			}
		}
		if err := a.ReleaseLease(ctx, l1); err != nil {
			t.Fatal(err)
		}
		l2, err := b.AcquireLease(ctx, "acme", "s1", "r2", testClaimTTL)
		if err != nil {
			t.Fatalf("acquiring a released lease: %v", err)
		}
		if l2.Token <= l1.Token || l2.Owner != "r2" || !l2.Expires.After(time.Now()) {
			t.Errorf("lease after release = %+v, first %+v: want a greater token", l2, l1)
		}
		// Releasing a lost lease does not release the new holder's.
		if err := a.ReleaseLease(ctx, l1); err != nil {
			t.Fatal(err)
		}
		if _, err := a.AcquireLease(ctx, "acme", "s1", "r1", testClaimTTL); !errors.Is(err, ErrLeaseHeld) {
			t.Errorf("after a stale release: err = %v, want ErrLeaseHeld", err)
		}
	})
}

func TestLeaseInvalidArguments(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for _, tt := range []struct {
			tenant, session, owner string
			ttl                    time.Duration
		}{
			{"", "s", "r", time.Second},
			{"t", "", "r", time.Second},
			{"t", "s", "", time.Second},
			{"t", "s", "r", 0},
		} {
			if _, err := s.AcquireLease(ctx, tt.tenant, tt.session, tt.owner, tt.ttl); !errors.Is(err, ErrInvalid) {
				t.Errorf("AcquireLease(%q, %q, %q, %v): err = %v, want ErrInvalid", tt.tenant, tt.session, tt.owner, tt.ttl, err)
			}
		}
		if _, err := s.ClaimSubmission(ctx, "", time.Second); !errors.Is(err, ErrInvalid) {
			t.Errorf("ClaimSubmission without owner: err = %v, want ErrInvalid", err)
		}
	})
}

// TestFencedReplicaCannotWrite is the paused replica: its lease expires
// (its heartbeat stopped), another replica takes the session, and every
// write the first one makes under its old lease is refused, storing
// nothing.
func TestFencedReplicaCannotWrite(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		a, b := replicaPair(t, db)
		ctx := context.Background()
		mustSession(t, a, "acme", "s1")
		if err := a.AppendMessage(ctx, "acme", "s1", msg("u1", engine.RoleUser, "hi")); err != nil {
			t.Fatal(err)
		}
		old, err := a.AcquireLease(ctx, "acme", "s1", "paused", time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		// Under its live lease, the holder writes.
		fenced := WithLease(ctx, old)
		if err := a.UpsertMessage(fenced, "acme", "s1", msg("a1", engine.RoleAssistant, "partial")); err != nil {
			t.Fatalf("write under the live lease: %v", err)
		}
		if err := a.JournalToolResult(fenced, toolResult("c0")); err != nil {
			t.Fatalf("journal under the live lease: %v", err)
		}
		cur := takeOver(t, b, old, "live")
		if err := b.UpsertMessage(WithLease(ctx, cur), "acme", "s1", msg("a1", engine.RoleAssistant, "new holder")); err != nil {
			t.Fatalf("the new holder's write: %v", err)
		}
		before := transcriptOf(t, b, "acme", "s1")
		turns := queryInt(t, b, "SELECT COUNT(*) FROM turns")

		rec := &TurnRecord{RequestID: "r", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "completed"}
		user := msg("u2", engine.RoleUser, "late")
		writes := map[string]func() error{
			"FinishTurn": func() error {
				return a.FinishTurn(fenced, "acme", "s1", msg("a1", engine.RoleAssistant, "stale"), rec)
			},
			"UpsertMessage":     func() error { return a.UpsertMessage(fenced, "acme", "s1", msg("a1", engine.RoleAssistant, "stale")) },
			"AppendMessage":     func() error { return a.AppendMessage(fenced, "acme", "s1", msg("a2", engine.RoleAssistant, "stale")) },
			"TruncateAfter":     func() error { return a.TruncateAfter(fenced, "acme", "s1", "u1", false) },
			"SetLastBody":       func() error { return a.SetLastBody(fenced, "acme", "s1", json.RawMessage(`{"x":1}`)) },
			"JournalToolResult": func() error { return a.JournalToolResult(fenced, toolResult("c1")) },
			"Admit": func() error {
				_, err := a.Admit(fenced, "acme", "demo", "s1", nil, &user)
				return err
			},
		}
		for name, write := range writes {
			if err := write(); !errors.Is(err, ErrFenced) {
				t.Errorf("%s under the lost lease: err = %v, want ErrFenced", name, err)
			}
		}
		if _, err := a.RenewLease(ctx, old, testClaimTTL); !errors.Is(err, ErrFenced) {
			t.Errorf("RenewLease of the lost lease: err = %v, want ErrFenced", err)
		}
		if got := transcriptOf(t, b, "acme", "s1"); got != before {
			t.Errorf("transcript after the fenced writes:\n%s\nwant\n%s", got, before)
		}
		if got := queryInt(t, b, "SELECT COUNT(*) FROM turns"); got != turns {
			t.Errorf("%d turn records after the fenced FinishTurn, want %d", got, turns)
		}
		if got := queryInt(t, b, "SELECT COUNT(*) FROM tool_results"); got != 1 {
			t.Errorf("%d tool results journaled, want 1: none under the lost lease", got)
		}
		// A lease of another session does not fence this one's writes.
		other, err := a.AcquireLease(ctx, "acme", "s2", "paused", testClaimTTL)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.AppendMessage(WithLease(ctx, other), "acme", "s1", msg("u3", engine.RoleUser, "unfenced")); err != nil {
			t.Errorf("write of s1 carrying s2's lease: %v", err)
		}
	})
}

// toolResult is a journaled result of tool call id of session acme/s1.
func toolResult(id string) *ToolResult {
	return &ToolResult{ToolCallKey: ToolCallKey{Tenant: "acme", SessionID: "s1", RequestID: "r", ToolCallID: id},
		ToolName: "weather", InputSHA256: "ab", Output: json.RawMessage(`{"t":1}`)}
}

// transcriptOf renders the session's transcript, read without any cache.
func transcriptOf(t *testing.T, s Store, tenant, sessionID string) string {
	t.Helper()
	msgs, err := s.Messages(context.Background(), tenant, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(msgs)
	return string(b)
}

func TestLeaseRenewAndCancel(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		a, b := replicaPair(t, db)
		ctx := context.Background()
		if held, err := b.CancelLease(ctx, "acme", "s1", 0); err != nil || held {
			t.Errorf("CancelLease without a lease = %v, %v; want false", held, err)
		}
		l, err := a.AcquireLease(ctx, "acme", "s1", "r1", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		first := l.Expires
		if st, err := a.RenewLease(ctx, l, 2*time.Minute); err != nil || st.Cancelled {
			t.Fatalf("RenewLease = %+v, %v", st, err)
		}
		if !l.Expires.After(first) {
			t.Errorf("renewal left the expiry at %v (was %v)", l.Expires, first)
		}
		if held, err := b.CancelLease(ctx, "acme", "s1", 0); err != nil || !held {
			t.Fatalf("CancelLease = %v, %v; want true", held, err)
		}
		if st, err := a.RenewLease(ctx, l, testClaimTTL); err != nil || !st.Cancelled {
			t.Errorf("RenewLease after cancel = %+v, %v; want cancelled", st, err)
		}
		// A released lease stays released: a renewal does not revive it.
		if err := a.ReleaseLease(ctx, l); err != nil {
			t.Fatal(err)
		}
		if _, err := a.RenewLease(ctx, l, testClaimTTL); !errors.Is(err, ErrLeaseReleased) {
			t.Errorf("RenewLease after release: err = %v, want ErrLeaseReleased", err)
		}
		// The next holding starts uncancelled, and a cancel meant for the
		// holding before (its token) does not reach it.
		l2, err := b.AcquireLease(ctx, "acme", "s1", "r2", testClaimTTL)
		if err != nil {
			t.Fatal(err)
		}
		if held, err := a.CancelLease(ctx, "acme", "s1", l.Token); err != nil || held {
			t.Errorf("CancelLease of the holding before = %v, %v; want false", held, err)
		}
		if st, err := b.RenewLease(ctx, l2, testClaimTTL); err != nil || st.Cancelled {
			t.Errorf("RenewLease of the next holding = %+v, %v; want not cancelled", st, err)
		}
		if held, err := a.CancelLease(ctx, "acme", "s1", l2.Token); err != nil || !held {
			t.Errorf("CancelLease of the holding by its token = %v, %v; want true", held, err)
		}
		if st, err := b.RenewLease(ctx, l2, testClaimTTL); err != nil || !st.Cancelled {
			t.Errorf("RenewLease after a cancel by its token = %+v, %v; want cancelled", st, err)
		}
	})
}

// TestSubmissionTakeover: the replica running a submission stops renewing
// its claim (it died, or paused); once the claim expires another replica
// takes the submission over, and the first one can neither renew nor
// finish it.
func TestSubmissionTakeover(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		a, b := open(t, db), open(t, db) // submissions are in the database on both drivers
		ctx := context.Background()
		sub := createSub(t, a, "acme", "A", "")
		next := createSub(t, a, "acme", "A", "")
		first, err := a.ClaimSubmission(ctx, "dying", time.Millisecond)
		if err != nil || first.ID != sub.ID || first.Attempts != 1 {
			t.Fatalf("first claim = %+v, %v", first, err)
		}
		var second *Submission
		for second == nil {
			time.Sleep(2 * time.Millisecond)
			second, err = b.ClaimSubmission(ctx, "live", testClaimTTL)
			if errors.Is(err, ErrNotFound) {
				second, err = nil, nil // the next one waits for sub; sub's claim is not expired yet
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if second.ID != sub.ID || second.Attempts != 2 {
			t.Fatalf("takeover claimed %s (attempt %d), want %s (attempt 2)", second.ID, second.Attempts, sub.ID)
		}
		if err := a.RenewSubmission(ctx, first, testClaimTTL); !errors.Is(err, ErrFenced) {
			t.Errorf("renewing the lost claim: err = %v, want ErrFenced", err)
		}
		if err := a.FinishSubmission(ctx, sub.ID, first.Attempts, StatusCompleted, nil); !errors.Is(err, ErrFenced) {
			t.Errorf("finishing under the lost claim: err = %v, want ErrFenced", err)
		}
		if err := b.RenewSubmission(ctx, second, testClaimTTL); err != nil {
			t.Errorf("renewing the live claim: %v", err)
		}
		if _, err := b.ClaimSubmission(ctx, "live", testClaimTTL); !errors.Is(err, ErrNotFound) {
			t.Errorf("claim while the session's submission runs under a live claim: err = %v, want ErrNotFound", err)
		}
		if err := b.FinishSubmission(ctx, sub.ID, second.Attempts, StatusCompleted, nil); err != nil {
			t.Fatalf("finishing under the live claim: %v", err)
		}
		if err := a.FinishSubmission(ctx, sub.ID, first.Attempts, StatusError, nil); !errors.Is(err, ErrConflict) {
			t.Errorf("finishing a finished submission: err = %v, want ErrConflict", err)
		}
		if err := b.RenewSubmission(ctx, second, testClaimTTL); !errors.Is(err, ErrFenced) {
			t.Errorf("renewing a finished claim: err = %v, want ErrFenced", err)
		}
		got, err := a.GetSubmission(ctx, "acme", "A", sub.ID)
		if err != nil || got.Status != StatusCompleted || got.Attempts != 2 {
			t.Errorf("submission = %+v, %v; want completed after 2 attempts", got, err)
		}
		if id := claim(t, b); id != next.ID {
			t.Errorf("claimed %q after the takeover finished, want %s", id, next.ID)
		}
	})
}

// TestClaimOnceUnderContention: many workers on two stores claim with
// short claims that they renew; every submission is claimed once.
func TestClaimOnceUnderContention(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		stores := []Store{open(t, db), open(t, db)}
		ctx := context.Background()
		const subs, workers = 40, 12
		for i := range subs {
			createSub(t, stores[0], "acme", fmt.Sprint("s", i%7), "")
		}
		var (
			mu     sync.Mutex
			claims = map[string]int{}
			wg     sync.WaitGroup
		)
		for w := range workers {
			st := stores[w%2]
			owner := fmt.Sprint("w", w)
			wg.Go(func() {
				idle := 0
				for idle < 50 {
					sub, err := st.ClaimSubmission(ctx, owner, testClaimTTL)
					if errors.Is(err, ErrNotFound) {
						idle++
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					idle = 0
					mu.Lock()
					claims[sub.ID]++
					mu.Unlock()
					if err := st.FinishSubmission(ctx, sub.ID, sub.Attempts, StatusCompleted, nil); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if len(claims) != subs {
			t.Errorf("%d submissions claimed, want %d", len(claims), subs)
		}
		for id, n := range claims {
			if n != 1 {
				t.Errorf("submission %s claimed %d times", id, n)
			}
		}
	})
}

func TestQueueLimits(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		limits := QueueLimits{PerSession: 2, PerTenant: 3}
		create := func(session, key string) (*Submission, bool, error) {
			return s.CreateSubmission(ctx, &Submission{Tenant: "acme", SessionID: session, Agent: "demo",
				IdempotencyKey: key, Request: json.RawMessage(`{}`)}, limits)
		}
		for _, k := range []string{"a", "b"} {
			if _, _, err := create("s1", k); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := create("s1", "c")
		var full *QueueFullError
		if !errors.As(err, &full) || full.Scope != "session" || full.Limit != 2 || !errors.Is(err, ErrQueueFull) {
			t.Fatalf("third submission of a session: err = %v, want the session's QueueFullError", err)
		}
		// A repeated key is answered whatever the queue.
		if sub, existing, err := create("s1", "a"); err != nil || !existing || sub.IdempotencyKey != "a" {
			t.Errorf("repeated key on a full queue = %v, %v, %v", sub, existing, err)
		}
		if _, _, err := create("s2", "d"); err != nil {
			t.Fatal(err)
		}
		_, _, err = create("s3", "e")
		if !errors.As(err, &full) || full.Scope != "tenant" || full.Limit != 3 {
			t.Fatalf("fourth submission of the tenant: err = %v, want the tenant's QueueFullError", err)
		}
		// Another tenant has its own queue; no limits, no bound.
		if _, _, err := s.CreateSubmission(ctx, &Submission{Tenant: "globex", SessionID: "s1", Agent: "demo",
			Request: json.RawMessage(`{}`)}, limits); err != nil {
			t.Errorf("another tenant: %v", err)
		}
		if _, _, err := s.CreateSubmission(ctx, &Submission{Tenant: "acme", SessionID: "s1", Agent: "demo",
			Request: json.RawMessage(`{}`)}, QueueLimits{}); err != nil {
			t.Errorf("without limits: %v", err)
		}
		// A running submission is no longer queued; dropping the queue
		// leaves it alone.
		running, err := s.ClaimSubmission(ctx, testOwner, testClaimTTL)
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.DropQueued(ctx, "acme", "s1")
		if err != nil || n != 2 {
			t.Fatalf("DropQueued = %d, %v; want 2", n, err)
		}
		if n, err := s.DropQueued(ctx, "acme", "s1"); err != nil || n != 0 {
			t.Errorf("DropQueued again = %d, %v; want 0", n, err)
		}
		if got, err := s.GetSubmission(ctx, "acme", running.SessionID, running.ID); err != nil || got.Status != StatusRunning {
			t.Errorf("running submission after DropQueued = %+v, %v", got, err)
		}
		if _, _, err := create("s1", "f"); err != nil {
			t.Errorf("after dropping the queue: %v", err)
		}
		if queryInt(t, s, "SELECT COUNT(*) FROM submissions WHERE status = 'aborted' AND result = '{\"error\":\"dropped\"}'") != 2 {
			t.Error("dropped submissions are not aborted with their result")
		}
	})
}

// msg is a one-part message of role.
func msg(id, role, s string) engine.UIMessage {
	return engine.UIMessage{ID: id, Role: role, Parts: []engine.UIPart{{Type: engine.PartText, Text: s}}}
}

// BenchmarkLease is the lease of every turn on a session nobody waits
// for: one acquisition (the fast path) and one release.
func BenchmarkLease(b *testing.B) {
	benchEachDB(b, func(b *testing.B, db testDB) {
		s := open(b, db)
		ctx := context.Background()
		for b.Loop() {
			l, err := s.AcquireLease(ctx, "acme", "s1", "r1", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.ReleaseLease(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
}
