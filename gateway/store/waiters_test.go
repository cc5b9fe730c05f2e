package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// The queues of session leases are PostgreSQL's (Relay): SQLite's one
// process queues in memory, in the gateway.

// leaseNotes listens on s and returns the tokens of the ChannelLease
// notifications of the session acme/s1, in order.
func leaseNotes(t *testing.T, s *Postgres) <-chan int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	notes := make(chan int64, 16)
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, func() { close(ready) }, func(n Notification) {
			if n.Channel == ChannelLease && n.Tenant == "acme" && n.SessionID == "s1" {
				notes <- n.Token
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-ready
	return notes
}

// mustEnqueue queues owner for the lease of acme's session.
func mustEnqueue(t *testing.T, s *Postgres, session, owner string, counted bool, bound int, ttl time.Duration) *Waiter {
	t.Helper()
	w, err := s.Enqueue(context.Background(), "acme", session, owner, counted, bound, ttl)
	if err != nil {
		t.Fatalf("Enqueue(%s, %s, counted %v): %v", session, owner, counted, err)
	}
	return w
}

// TestTurnQueue: the requests that find a session's lease held queue for
// it: the bound counts the live counted waiters, the lease goes to the
// waiters in the order they registered (a newcomer does not take it from
// them), and a release or a leaving waiter wakes them when the lease is
// free and someone waits.
func TestTurnQueue(t *testing.T) {
	db := freshPostgres(t)
	a, b := open(t, db).(*Postgres), open(t, db).(*Postgres)
	ctx := context.Background()
	notes := leaseNotes(t, b)
	const bound = 2

	l0, err := a.AcquireLease(ctx, "acme", "s1", "ra", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	w1 := mustEnqueue(t, a, "s1", "ra", true, bound, time.Hour)
	w2 := mustEnqueue(t, b, "s1", "rb", true, bound, time.Hour)
	worker := mustEnqueue(t, b, "s1", "rb", false, bound, time.Hour) // not counted
	if _, err := a.Enqueue(ctx, "acme", "s1", "rc", true, bound, time.Hour); !errors.Is(err, ErrTurnQueueFull) {
		t.Fatalf("a counted waiter beyond the bound: err = %v, want ErrTurnQueueFull", err)
	}
	mustEnqueue(t, a, "s2", "ra", true, bound, time.Hour) // another session's queue is its own
	if !(w1.ID < w2.ID && w2.ID < worker.ID) {
		t.Errorf("ids %d, %d, %d: not in the order of registration", w1.ID, w2.ID, worker.ID)
	}

	if _, err := a.AcquireQueued(ctx, w1, time.Hour); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("the first waiter while the lease is held: err = %v, want ErrLeaseHeld", err)
	}
	if err := a.ReleaseLease(ctx, l0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(ctx, "acme", "s1", "rc", time.Hour); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("a newcomer while waiters queue: err = %v, want ErrLeaseHeld", err)
	}
	if _, err := b.AcquireQueued(ctx, w2, time.Hour); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("the second waiter before the first: err = %v, want ErrLeaseHeld", err)
	}
	l1, err := a.AcquireQueued(ctx, w1, time.Hour)
	if err != nil {
		t.Fatalf("the first waiter after the release: %v", err)
	}
	if l1.Token <= l0.Token || l1.Owner != "ra" || !l1.Expires.After(time.Now()) {
		t.Errorf("lease of the first waiter = %+v, after %+v", l1, l0)
	}
	if _, err := a.AcquireQueued(ctx, w1, time.Hour); !errors.Is(err, ErrNotQueued) {
		t.Errorf("a waiter that took the lease: err = %v, want ErrNotQueued (its place went with it)", err)
	}
	w3 := mustEnqueue(t, a, "s1", "ra", true, bound, time.Hour) // w1 no longer counts

	// A waiter leaving while the lease is held wakes nobody.
	if err := b.Dequeue(ctx, w2); err != nil {
		t.Fatal(err)
	}
	if err := a.ReleaseLease(ctx, l1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AcquireQueued(ctx, w3, time.Hour); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("w3 before the worker registered ahead: err = %v, want ErrLeaseHeld", err)
	}
	lw, err := b.AcquireQueued(ctx, worker, time.Hour)
	if err != nil {
		t.Fatalf("the worker, first once w2 left: %v", err)
	}
	if err := a.Dequeue(ctx, w3); err != nil {
		t.Fatal(err)
	}
	// Nobody waits: the release wakes nobody, the next newcomer takes the
	// lease at once.
	if err := b.ReleaseLease(ctx, lw); err != nil {
		t.Fatal(err)
	}
	l2, err := b.AcquireLease(ctx, "acme", "s1", "rc", time.Hour)
	if err != nil {
		t.Fatalf("a newcomer once the queue is empty: %v", err)
	}
	if err := b.ReleaseLease(ctx, l2); err != nil {
		t.Fatal(err)
	}
	// A waiter leaving while the lease is free wakes the others.
	x := mustEnqueue(t, a, "s1", "ra", true, bound, time.Hour)
	mustEnqueue(t, b, "s1", "rb", true, bound, time.Hour)
	if err := a.Dequeue(ctx, x); err != nil {
		t.Fatal(err)
	}

	expectNotes(t, notes, l0.Token, l1.Token, 0)
}

// expectNotes takes the next notifications of notes (see leaseNotes) and
// fails unless their tokens are want, in order.
func expectNotes(t *testing.T, notes <-chan int64, want ...int64) {
	t.Helper()
	for i, tok := range want {
		select {
		case got := <-notes:
			if got != tok {
				t.Errorf("notification %d: token %d, want %d (notifications %v)", i, got, tok, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("notification %d (token %d) never came", i, tok)
		}
	}
}

// TestTurnQueueExpiry: the place of a waiter whose replica died (it stopped
// renewing it) expires: it no longer counts against the bound nor holds up
// the waiters behind it, renewing it does not bring it back, and the sweep
// deletes it; a renewed place outlives its first ttl.
func TestTurnQueueExpiry(t *testing.T) {
	db := freshPostgres(t)
	a := open(t, db).(*Postgres)
	ctx := context.Background()
	const (
		bound = 2
		short = 200 * time.Millisecond
	)
	l, err := a.AcquireLease(ctx, "acme", "s1", "ra", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dead := mustEnqueue(t, a, "s1", "dead", true, bound, short)
	renewed := mustEnqueue(t, a, "s1", "live", true, bound, short)
	if _, err := a.Enqueue(ctx, "acme", "s1", "other", true, bound, time.Hour); !errors.Is(err, ErrTurnQueueFull) {
		t.Fatalf("beyond the bound: err = %v, want ErrTurnQueueFull", err)
	}
	if err := a.RenewWaiters(ctx, []int64{renewed.ID}, time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * short)
	if err := a.RenewWaiters(ctx, []int64{dead.ID}, time.Hour); err != nil { // too late
		t.Fatal(err)
	}
	if _, err := a.AcquireQueued(ctx, dead, time.Hour); !errors.Is(err, ErrNotQueued) {
		t.Errorf("an expired waiter: err = %v, want ErrNotQueued", err)
	}
	mustEnqueue(t, a, "s1", "other", true, bound, time.Hour) // the dead one no longer counts
	if _, err := a.AcquireQueued(ctx, renewed, time.Hour); !errors.Is(err, ErrLeaseHeld) {
		t.Errorf("a renewed waiter while the lease is held: err = %v, want ErrLeaseHeld", err)
	}
	if err := a.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AcquireQueued(ctx, renewed, time.Hour); err != nil {
		t.Errorf("the waiter behind an expired one: %v", err)
	}
	if n, err := a.SweepWaiters(ctx); err != nil || n != 1 {
		t.Errorf("SweepWaiters = %d, %v; want the dead waiter's place", n, err)
	}

	// A session never leased: its first waiter takes the lease with the
	// first token.
	w := mustEnqueue(t, a, "fresh", "ra", false, bound, time.Hour)
	if l, err := a.AcquireQueued(ctx, w, time.Hour); err != nil || l.Token != 1 {
		t.Errorf("AcquireQueued of a session never leased = %+v, %v; want token 1", l, err)
	}
	if _, err := a.Enqueue(ctx, "acme", "s1", "", true, bound, time.Hour); !errors.Is(err, ErrInvalid) {
		t.Errorf("Enqueue without owner: err = %v, want ErrInvalid", err)
	}
}

// TestEnqueueBoundUnderContention: counted waiters registering at once on
// two replicas never exceed the bound.
func TestEnqueueBoundUnderContention(t *testing.T) {
	db := freshPostgres(t)
	stores := []*Postgres{open(t, db).(*Postgres), open(t, db).(*Postgres)}
	const bound, tries = 3, 16
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		got  int
		errs []error
	)
	for i := range tries {
		wg.Go(func() {
			_, err := stores[i%2].Enqueue(context.Background(), "acme", "s1", "r", true, bound, time.Hour)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				got++
			case !errors.Is(err, ErrTurnQueueFull):
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if got != bound || len(errs) > 0 {
		t.Errorf("%d of %d waiters queued (errors %v), want %d", got, tries, errs, bound)
	}
}

// TestReleaseWakesWaiterRegisteredDuringIt: a waiter that registers while
// a release of the lease waits for the lease row (held here by another
// transaction; in production, for the instant between the release's
// snapshot and its lock) is woken by that release. Its acquisition, tried
// before the release got the row, found the lease held; with the
// release's own snapshot, which predates the registration, the release
// would see no waiter and wake nobody, and the waiter would start on its
// poll.
func TestReleaseWakesWaiterRegisteredDuringIt(t *testing.T) {
	for _, tt := range []struct {
		name    string
		release func(ctx context.Context, s *Postgres, l *Lease) error
	}{
		{"ReleaseLease", func(ctx context.Context, s *Postgres, l *Lease) error { return s.ReleaseLease(ctx, l) }},
		{"ReleaseUnfollowed", func(ctx context.Context, s *Postgres, l *Lease) error {
			_, err := s.ReleaseUnfollowed(ctx, l)
			return err
		}},
		{"FinishTurn WithRelease", func(ctx context.Context, s *Postgres, l *Lease) error {
			var released bool
			return s.FinishTurn(WithRelease(ctx, l, &released), "acme", "s1", assistant("a1", "done"), turnRecord("s1", "r1"))
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := freshPostgres(t)
			a, b := open(t, db).(*Postgres), open(t, db).(*Postgres)
			ctx := context.Background()
			notes := leaseNotes(t, b)
			if _, err := a.Admit(ctx, "acme", "demo", "s1", nil, nil); err != nil {
				t.Fatal(err)
			}
			l, err := a.AcquireLease(ctx, "acme", "s1", "ra", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			// Another transaction holds the lease row: the release takes
			// its snapshot, then waits for the row.
			hold, err := b.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer hold.Rollback(ctx) //nolint:errcheck // a no-op after Commit.
			var holder int32
			if err := hold.QueryRow(ctx, `SELECT pg_backend_pid() FROM session_leases
				WHERE tenant = 'acme' AND session_id = 's1' FOR UPDATE`).Scan(&holder); err != nil {
				t.Fatal(err)
			}
			released := make(chan error, 1)
			go func() { released <- tt.release(ctx, a, l) }()
			for blocked := false; !blocked; {
				if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
					WHERE $1::int = ANY (pg_blocking_pids(pid)))`, holder).Scan(&blocked); err != nil {
					t.Fatal(err)
				}
			}
			// (The waiter's own acquisition, which in production ran
			// before the release took the row, would wait for the row here.)
			w := mustEnqueue(t, b, "s1", "rb", true, 4, time.Hour)
			if err := hold.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-released; err != nil {
				t.Fatalf("release: %v", err)
			}
			select {
			case tok := <-notes:
				if tok != l.Token {
					t.Errorf("woken with token %d, want the released lease's %d", tok, l.Token)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the release woke nobody: the waiter that registered during it would start on its poll")
			}
			if _, err := b.AcquireQueued(ctx, w, time.Hour); err != nil {
				t.Errorf("the woken waiter: %v", err)
			}
		})
	}
}
