package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notes := make(chan Notification, 16)
	ready := make(chan struct{})
	listened := make(chan error, 1)
	go func() {
		listened <- b.Listen(ctx, func() { close(ready) }, func(n Notification) { notes <- n })
	}()
	<-ready

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
	if _, err := other.CancelLease(ctx, "acme", "s1"); err != nil {
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
	if held, err := a.CancelLease(ctx, "acme", "s1"); err != nil || !held {
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
	cancel()
	if err := <-listened; err != nil {
		t.Errorf("Listen: %v", err)
	}
}
