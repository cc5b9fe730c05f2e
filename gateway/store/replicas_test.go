package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turngate/turngate/engine"
)

// TestCacheCoherentAcrossReplicas: two stores with caches on one
// PostgreSQL database, as two replicas; after every write on one, the
// other's cached transcript is the stored one (it checks the session's
// version on each read), including when the writes interleave.
func TestCacheCoherentAcrossReplicas(t *testing.T) {
	db := freshPostgres(t)
	a, b := open(t, db), open(t, db)
	ctx := context.Background()
	user := msg("u0", engine.RoleUser, "hello")
	if _, err := a.Admit(ctx, "acme", "demo", "s1", json.RawMessage(`{"n":0}`), &user); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		write func(s Store) error
	}{
		{"append", func(s Store) error { return s.AppendMessage(ctx, "acme", "s1", msg("a1", engine.RoleAssistant, "one")) }},
		{"upsert", func(s Store) error {
			return s.UpsertMessage(ctx, "acme", "s1", msg("a1", engine.RoleAssistant, "one, edited"))
		}},
		{"last body", func(s Store) error { return s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`{"n":1}`)) }},
		{"admit", func(s Store) error {
			u := msg("u2", engine.RoleUser, "again")
			_, err := s.Admit(ctx, "acme", "demo", "s1", json.RawMessage(`{"n":2}`), &u)
			return err
		}},
		{"finish turn", func(s Store) error {
			return s.FinishTurn(ctx, "acme", "s1", msg("a2", engine.RoleAssistant, "two"),
				&TurnRecord{RequestID: "r", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "completed"})
		}},
		{"truncate", func(s Store) error { return s.TruncateAfter(ctx, "acme", "s1", "a1", false) }},
	}
	for i, st := range steps {
		// Both caches hold the session before each write.
		assertCoherent(t, db, a, "acme", "s1")
		assertCoherent(t, db, b, "acme", "s1")
		writer, reader := a, b
		if i%2 == 1 {
			writer, reader = b, a
		}
		if err := st.write(writer); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		// The writer's cache applied its write; the reader's is stale and
		// must not be served.
		if !cached(writer, "acme", "s1") && st.name != "truncate" {
			t.Errorf("%s: the writer's cache dropped the session", st.name)
		}
		assertCoherent(t, db, reader, "acme", "s1")
		assertCoherent(t, db, writer, "acme", "s1")
	}
	// Interleaved: b writes, then a writes on top of an entry that misses
	// b's write; a's cache must drop it rather than apply its own write
	// to it.
	assertCoherent(t, db, a, "acme", "s1")
	if err := b.AppendMessage(ctx, "acme", "s1", msg("b1", engine.RoleAssistant, "by b")); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendMessage(ctx, "acme", "s1", msg("a3", engine.RoleUser, "by a")); err != nil {
		t.Fatal(err)
	}
	if cached(a, "acme", "s1") {
		t.Error("a's cache applied its write to an entry that missed b's")
	}
	assertCoherent(t, db, a, "acme", "s1")
	assertCoherent(t, db, b, "acme", "s1")
}

// TestRelayStream: one replica appends a stream's batches, another reads
// them from the first and is notified of each.
func TestRelayStream(t *testing.T) {
	db := freshPostgres(t)
	a, b := open(t, db).(*Postgres), open(t, db).(*Postgres)
	ctx := context.Background()
	notes := listening(t, b)

	// A gateway on another schema of the same database relays and cancels
	// a session of the same name: channels are database-wide, and b must
	// not take its notifications for its own.
	other := open(t, freshPostgres(t)).(*Postgres)
	ol, err := other.AcquireLease(ctx, "acme", "s1", "elsewhere", testClaimTTL)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.AppendChunk(ctx, ol, 0, []byte("data: {}\n\n"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := other.CancelLease(ctx, "acme", "s1", 0); err != nil {
		t.Fatal(err)
	}

	if _, ok, err := b.LiveStream(ctx, "acme", "s1"); err != nil || ok {
		t.Fatalf("LiveStream before any turn = %v, %v", ok, err)
	}
	l, err := a.AcquireLease(ctx, "acme", "s1", "r1", testClaimTTL)
	if err != nil {
		t.Fatal(err)
	}
	token, ok, err := b.LiveStream(ctx, "acme", "s1")
	if err != nil || !ok || token != l.Token {
		t.Fatalf("LiveStream = %d, %v, %v; want %d", token, ok, err, l.Token)
	}
	batches := []string{"data: {\"type\":\"start\"}\n\n", "data: {\"type\":\"text-delta\"}\n\n", "data: [DONE]\n\n"}
	for i, f := range batches {
		if err := a.AppendChunk(ctx, l, int64(i), []byte(f), i == len(batches)-1); err != nil {
			t.Fatal(err)
		}
		n := <-notes
		if n.Channel != ChannelStream || n.Schema != a.schema || n.Tenant != "acme" || n.SessionID != "s1" || n.Token != l.Token {
			t.Errorf("notification %+v", n)
		}
	}
	chunks, err := b.ReadChunks(ctx, "acme", "s1", l.Token, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 2 || string(chunks[0].Frames) != batches[1] || chunks[0].Done || !chunks[1].Done {
		t.Errorf("ReadChunks from 1 = %+v", chunks)
	}
	if held, err := a.CancelLease(ctx, "acme", "s1", 0); err != nil || !held {
		t.Fatalf("CancelLease = %v, %v", held, err)
	}
	if n := <-notes; n.Channel != ChannelCancel || n.Schema != a.schema || n.Token != l.Token {
		t.Errorf("cancel notification %+v", n)
	}
	if n, err := a.SweepStreams(ctx, -time.Minute); err != nil || n != 0 {
		t.Errorf("SweepStreams while the turn's lease is live = %d, %v; want 0", n, err)
	}
	if err := a.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if n, err := a.SweepStreams(ctx, -time.Minute); err != nil || n != len(batches) {
		t.Errorf("SweepStreams = %d, %v; want %d", n, err, len(batches))
	}
}

// listening listens for s's notifications until the test ends, and
// returns them.
func listening(t *testing.T, s *Postgres) <-chan Notification {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	notes := make(chan Notification, 16)
	ready := make(chan struct{})
	listened := make(chan error, 1)
	go func() {
		listened <- s.Listen(ctx, func() { close(ready) }, func(n Notification) { notes <- n })
	}()
	<-ready
	t.Cleanup(func() {
		cancel()
		if err := <-listened; err != nil {
			t.Errorf("Listen: %v", err)
		}
	})
	return notes
}

// TestFollowStream: a reader asks for the stream of a running turn; the
// holder hears it (a notification, and its next renewal), and its release
// is refused until it releases after the relay; the next holding starts
// unfollowed and releases at once.
func TestFollowStream(t *testing.T) {
	db := freshPostgres(t)
	a, b := open(t, db).(*Postgres), open(t, db).(*Postgres)
	ctx := context.Background()
	notes := listening(t, a)

	if _, ok, err := b.FollowStream(ctx, "acme", "s1"); err != nil || ok {
		t.Fatalf("FollowStream before any turn = %v, %v", ok, err)
	}
	l, err := a.AcquireLease(ctx, "acme", "s1", "r1", testClaimTTL)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := a.RenewLease(ctx, l, testClaimTTL); err != nil || st.Followed {
		t.Fatalf("RenewLease before a follow = %+v, %v", st, err)
	}
	token, ok, err := b.FollowStream(ctx, "acme", "s1")
	if err != nil || !ok || token != l.Token {
		t.Fatalf("FollowStream = %d, %v, %v; want %d", token, ok, err, l.Token)
	}
	if n := <-notes; n.Channel != ChannelFollow || n.Schema != a.schema || n.Tenant != "acme" || n.SessionID != "s1" || n.Token != l.Token {
		t.Errorf("follow notification %+v", n)
	}
	if st, err := a.RenewLease(ctx, l, testClaimTTL); err != nil || !st.Followed || st.Cancelled {
		t.Errorf("RenewLease after a follow = %+v, %v; want followed", st, err)
	}
	if released, err := a.ReleaseUnfollowed(ctx, l); err != nil || released {
		t.Fatalf("ReleaseUnfollowed of a followed lease = %v, %v; want refused", released, err)
	}
	if tok, ok, err := b.LiveStream(ctx, "acme", "s1"); err != nil || !ok || tok != l.Token {
		t.Fatalf("LiveStream after a refused release = %d, %v, %v", tok, ok, err)
	}
	if err := a.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.FollowStream(ctx, "acme", "s1"); err != nil || ok {
		t.Fatalf("FollowStream after the release = %v, %v", ok, err)
	}

	l2, err := a.AcquireLease(ctx, "acme", "s1", "r1", testClaimTTL)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := a.RenewLease(ctx, l2, testClaimTTL); err != nil || st.Followed {
		t.Errorf("RenewLease of the next holding = %+v, %v; want not followed", st, err)
	}
	if released, err := a.ReleaseUnfollowed(ctx, l2); err != nil || !released {
		t.Fatalf("ReleaseUnfollowed = %v, %v; want released", released, err)
	}
	if _, err := a.RenewLease(ctx, l2, testClaimTTL); !errors.Is(err, ErrLeaseReleased) {
		t.Errorf("RenewLease after the release: err = %v, want ErrLeaseReleased", err)
	}
}

// TestLeaseReadsVersion: the lease's acquisition reads the session's
// version, and a transcript read under the lease checks its cached entry
// against it without a statement of its own; a write of another replica
// before the acquisition, and a fenced write of an expired holding that
// commits while the acquisition waits for the lease row, are both seen.
func TestLeaseReadsVersion(t *testing.T) {
	db := freshPostgres(t)
	var trace statementCount
	a := open(t, db, WithTracer(&trace)).(*Postgres)
	b := open(t, db).(*Postgres)
	ctx := context.Background()
	user := msg("u0", engine.RoleUser, "hello")
	if _, err := a.Admit(ctx, "acme", "demo", "s1", nil, &user); err != nil {
		t.Fatal(err)
	}
	assertCoherent(t, db, a, "acme", "s1") // cached

	// Unchanged: the cached entry is served without a statement.
	l, err := a.AcquireLease(ctx, "acme", "s1", "r1", testClaimTTL)
	if err != nil {
		t.Fatal(err)
	}
	before := trace.n.Load()
	if _, _, err := a.Transcript(WithLease(ctx, l), "acme", "s1"); err != nil {
		t.Fatal(err)
	}
	if n := trace.n.Load() - before; n != 0 {
		t.Errorf("a cache hit under the lease sent %d statements, want 0", n)
	}
	if err := a.ReleaseLease(ctx, l); err != nil {
		t.Fatal(err)
	}

	// Another replica writes, then a takes the lease: a's entry is stale.
	if err := b.AppendMessage(ctx, "acme", "s1", msg("b1", engine.RoleAssistant, "by b")); err != nil {
		t.Fatal(err)
	}
	l, err = a.AcquireLease(ctx, "acme", "s1", "r1", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	assertLeaseCoherent(t, db, a, l)

	// l expires, unreleased; its holder's fenced write is in flight when
	// b takes the session: the acquisition waits for it, and counts it.
	for time.Until(l.Expires) > -time.Millisecond {
		time.Sleep(time.Millisecond)
	}
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit.
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := pgCheckFence(WithLease(ctx, l), tx, "acme", "s1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pgTouch(ctx, tx, "acme", "s1", nanos(now())); err != nil {
		t.Fatal(err)
	}
	took := make(chan *Lease, 1)
	go func() {
		l2, err := b.AcquireLease(ctx, "acme", "s1", "r2", testClaimTTL)
		if err != nil {
			t.Error(err)
		}
		took <- l2
	}()
	for waiting := 0; waiting == 0; {
		if err := b.pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-took
	if l2 == nil {
		t.FailNow()
	}
	stored, err := a.readVersion(ctx, "acme", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if l2.version != stored {
		t.Errorf("the acquisition read version %d, want %d: the write it waited for", l2.version, stored)
	}
	assertLeaseCoherent(t, db, b, l2)
}

// assertLeaseCoherent checks that s's transcript read under l is the
// stored one.
func assertLeaseCoherent(t *testing.T, db testDB, s Store, l *Lease) {
	t.Helper()
	ref, err := db.reference()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, got, err := s.Transcript(WithLease(ctx, l), l.Tenant, l.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	_, want, err := ref.Transcript(ctx, l.Tenant, l.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Errorf("transcript under the lease:\n%s\nwant the stored one:\n%s", g, w)
	}
}

// statementCount is a pgx tracer that counts statements.
type statementCount struct{ n atomic.Int64 }

func (c *statementCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (*statementCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
