package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/turngate/turngate/engine"
)

// assertCoherent fails unless s's Transcript of the tenant's session id,
// through its cache, equals a read through a second store opened on db
// without a cache: the same session, the same messages, or both
// ErrNotFound.
func assertCoherent(t *testing.T, db testDB, s Store, tenant, id string) {
	t.Helper()
	ref, err := db.reference()
	if err != nil {
		t.Fatalf("opening the reference store: %v", err)
	}
	ctx := context.Background()
	// Twice: a miss fills the cache, so the second read is a hit.
	for range 2 {
		gotSess, gotMsgs, gotErr := s.Transcript(ctx, tenant, id)
		wantSess, wantMsgs, wantErr := ref.Transcript(ctx, tenant, id)
		if errors.Is(wantErr, ErrNotFound) {
			if !errors.Is(gotErr, ErrNotFound) {
				t.Fatalf("%s/%s: Transcript = %+v, %v; want ErrNotFound", tenant, id, gotSess, gotErr)
			}
			continue
		}
		if wantErr != nil || gotErr != nil {
			t.Fatalf("%s/%s: Transcript: err = %v; reference: %v", tenant, id, gotErr, wantErr)
		}
		if !reflect.DeepEqual(gotSess, wantSess) {
			t.Fatalf("%s/%s: cached session\n%+v\nwant\n%+v", tenant, id, gotSess, wantSess)
		}
		if !reflect.DeepEqual(gotMsgs, wantMsgs) {
			g, _ := json.Marshal(gotMsgs)
			w, _ := json.Marshal(wantMsgs)
			t.Fatalf("%s/%s: cached transcript\n%s\nwant\n%s", tenant, id, g, w)
		}
	}
	checkCacheBytes(t, s)
}

// checkCacheBytes fails unless the cache's byte counts are those of its
// entries and it is within its bounds.
func checkCacheBytes(t *testing.T, s Store) {
	t.Helper()
	c := layer(s).cache
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for el := c.lru.Front(); el != nil; el = el.Next() {
		e := el.Value.(*cacheEntry)
		if n := entryBytes(e); e.bytes != n {
			t.Errorf("%v counts %d bytes, has %d", e.key, e.bytes, n)
		}
		total += e.bytes
	}
	if c.bytes != total || c.lru.Len() != len(c.entries) {
		t.Errorf("cache counts %d bytes in %d entries, has %d in %d", c.bytes, len(c.entries), total, c.lru.Len())
	}
	if c.bytes > c.maxBytes || c.lru.Len() > c.maxEntries {
		t.Errorf("cache holds %d bytes in %d entries, bounds %d, %d", c.bytes, c.lru.Len(), c.maxBytes, c.maxEntries)
	}
}

// cached reports whether the tenant's session id is in s's cache.
func cached(s Store, tenant, id string) bool {
	c := layer(s).cache
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[cacheKey{tenant, id}]
	return ok
}

func TestCacheCoherence(t *testing.T) {
	ctx := context.Background()
	user := func(id string) *engine.UIMessage { m := text(id, "question "+id); return &m }
	rec := func(session string) *TurnRecord { return turnRecord(session, "r") }
	grown := func() engine.UIMessage {
		m := loadTranscript(t)[1]
		m.Parts = append(m.Parts, engine.UIPart{Type: engine.PartText, Text: "More.", State: engine.StateDone})
		m.Metadata = json.RawMessage(` { "model" : "other" } `) // stored compacted
		return m
	}
	tests := []struct {
		name    string
		write   func(s Store) error
		wantErr error
	}{
		{"admit appends", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "s1", json.RawMessage(`{"k":1}`), user("u9"))
			return err
		}, nil},
		{"admit without a message sets the body", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "s1", json.RawMessage(`{"k":2}`), nil)
			return err
		}, nil},
		{"admit with a nil body clears it", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "s1", nil, user("u9"))
			return err
		}, nil},
		{"admit with an empty body clears it", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "s1", json.RawMessage{}, nil)
			return err
		}, nil},
		{"admit creates the session", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "new", json.RawMessage(`{"k":3}`), user("n1"))
			return err
		}, nil},
		{"admit creates the session without a message", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "new", nil, nil)
			return err
		}, nil},
		{"admit in another tenant", func(s Store) error {
			_, err := s.Admit(ctx, "globex", "demo", "s1", nil, user("g1"))
			return err
		}, nil},
		{"admit of another agent writes nothing", func(s Store) error {
			sess, err := s.Admit(ctx, "acme", "other", "s1", json.RawMessage(`{"k":4}`), user("u9"))
			if err == nil && sess.Agent != "demo" {
				return fmt.Errorf("session of agent %q, want demo", sess.Agent)
			}
			return err
		}, nil},
		{"admit of a duplicate message", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "s1", json.RawMessage(`{"k":5}`), user("u1"))
			return err
		}, ErrConflict},
		{"admit of an invalid body", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "s1", json.RawMessage(`{`), user("u9"))
			return err
		}, ErrInvalid},
		{"admit of a message without role", func(s Store) error {
			_, err := s.Admit(ctx, "acme", "demo", "s1", nil, &engine.UIMessage{ID: "x"})
			return err
		}, ErrInvalid},
		{"finish turn appends", func(s Store) error {
			return s.FinishTurn(ctx, "acme", "s1", assistant("a9", "answer"), rec("s1"))
		}, nil},
		{"finish turn replaces in place", func(s Store) error {
			return s.FinishTurn(ctx, "acme", "s1", grown(), rec("s1"))
		}, nil},
		{"finish turn of another session's record", func(s Store) error {
			return s.FinishTurn(ctx, "acme", "s1", assistant("a9", "answer"), rec("s2"))
		}, ErrInvalid},
		{"finish turn of a missing session", func(s Store) error {
			return s.FinishTurn(ctx, "acme", "nope", assistant("a9", "answer"), rec("nope"))
		}, ErrNotFound},
		{"upsert replaces in place", func(s Store) error { return s.UpsertMessage(ctx, "acme", "s1", grown()) }, nil},
		{"upsert appends", func(s Store) error { return s.UpsertMessage(ctx, "acme", "s1", *user("u9")) }, nil},
		{"upsert of an invalid message", func(s Store) error {
			return s.UpsertMessage(ctx, "acme", "s1", engine.UIMessage{Role: "user"})
		}, ErrInvalid},
		{"upsert of a non-UTF-8 id", func(s Store) error {
			// Both ids encode to "x\ufffd" in the body; the store keeps them apart.
			if err := s.AppendMessage(ctx, "acme", "s1", *user("x\xff")); err != nil {
				return err
			}
			if err := s.UpsertMessage(ctx, "acme", "s1", *user("x\ufffd")); err != nil {
				return err
			}
			return s.UpsertMessage(ctx, "acme", "s1", *user("x\xfe"))
		}, nil},
		{"append", func(s Store) error { return s.AppendMessage(ctx, "acme", "s1", *user("u9")) }, nil},
		{"append of a duplicate", func(s Store) error { return s.AppendMessage(ctx, "acme", "s1", *user("u1")) }, ErrConflict},
		{"append to a missing session", func(s Store) error { return s.AppendMessage(ctx, "acme", "nope", *user("u9")) }, ErrNotFound},
		{"set last body", func(s Store) error { return s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`{"k":6}`)) }, nil},
		{"clear last body", func(s Store) error { return s.SetLastBody(ctx, "acme", "s1", nil) }, nil},
		{"set an invalid last body", func(s Store) error { return s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`[`)) }, ErrInvalid},
		{"set the last body of a missing session", func(s Store) error {
			return s.SetLastBody(ctx, "acme", "nope", json.RawMessage(`{}`))
		}, ErrNotFound},
		{"truncate after", func(s Store) error { return s.TruncateAfter(ctx, "acme", "s1", "a1", false) }, nil},
		{"truncate inclusive", func(s Store) error { return s.TruncateAfter(ctx, "acme", "s1", "u2", true) }, nil},
		{"truncate after an unknown message", func(s Store) error { return s.TruncateAfter(ctx, "acme", "s1", "nope", false) }, ErrNotFound},
		{"get or create an existing session", func(s Store) error {
			_, _, err := s.GetOrCreateSession(ctx, "acme", "demo", "s1")
			return err
		}, nil},
		{"get or create a new session", func(s Store) error {
			_, _, err := s.GetOrCreateSession(ctx, "acme", "demo", "new")
			return err
		}, nil},
		{"create a submission in a new session", func(s Store) error {
			_, _, err := s.CreateSubmission(ctx, &Submission{Tenant: "acme", SessionID: "new", Agent: "demo", Request: json.RawMessage(`{}`)}, QueueLimits{})
			return err
		}, nil},
		{"create a submission in an existing session", func(s Store) error {
			_, _, err := s.CreateSubmission(ctx, &Submission{Tenant: "acme", SessionID: "s1", Agent: "demo", Request: json.RawMessage(`{}`)}, QueueLimits{})
			return err
		}, nil},
		{"record a turn", func(s Store) error { return s.RecordTurn(ctx, rec("s1")) }, nil},
	}
	keys := []cacheKey{{"acme", "s1"}, {"acme", "new"}, {"globex", "s1"}, {"acme", "nope"}}
	for _, warm := range []bool{true, false} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/warm=%t", tt.name, warm), func(t *testing.T) {
				forEachDB(t, func(t *testing.T, db testDB) {
					s := open(t, db)
					storeTranscript(t, s, "acme", "s1")
					if err := s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`{"k":0}`)); err != nil {
						t.Fatal(err)
					}
					if warm {
						for _, k := range keys {
							_, _, _ = s.Transcript(ctx, k.tenant, k.id)
						}
						if !cached(s, "acme", "s1") {
							t.Fatal("s1 is not cached after a read")
						}
					}
					err := tt.write(s)
					if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
						t.Fatalf("err = %v, want %v", err, tt.wantErr)
					}
					for _, k := range keys {
						assertCoherent(t, db, s, k.tenant, k.id)
					}
					if warm && cached(s, "acme", "nope") {
						t.Error("a missing session is cached")
					}
				})
			})
		}
	}
}

// TestCacheAdmitRunAgain checks writes whose transaction SQLite lost and
// that ran again: only the run that committed reaches the cache.
func TestCacheAdmitRunAgain(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	storeTranscript(t, s, "acme", "s1")
	if _, _, err := s.Transcript(ctx, "acme", "s1"); err != nil {
		t.Fatal(err)
	}
	u9, n1 := text("u9", "again"), text("n1", "new")
	before := s.commits.Load()
	release := holdWriter(t, s)
	errs := queue(t, s,
		func() error {
			_, err := s.Admit(ctx, "acme", "demo", "s1", json.RawMessage(`{"k":1}`), &u9)
			return err
		},
		func() error { _, err := s.Admit(ctx, "acme", "demo", "new", nil, &n1); return err },
		func() error {
			return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `ROLLBACK`)
				return err
			})
		},
		func() error { return s.FinishTurn(ctx, "acme", "s1", assistant("a9", "answer"), turnRecord("s1", "r")) },
		func() error { return s.AppendMessage(ctx, "acme", "new", text("n2", "more")) },
	)
	release()
	for i, ch := range errs {
		if err := <-ch; (err != nil) != (i == 2) {
			t.Errorf("write %d: %v", i, err)
		}
	}
	if got := s.commits.Load() - before; got != 2 {
		t.Errorf("%d commits, want 2 (the holding write, then the others again)", got)
	}
	if !cached(s, "acme", "s1") || !cached(s, "acme", "new") {
		t.Error("the sessions are not cached after the writes")
	}
	for _, id := range []string{"s1", "new"} {
		assertCoherent(t, newSQLiteDB(t, path), s, "acme", id)
	}
}

// TestCacheFillRace checks the two windows where a read that missed could
// store a transcript the cache then changes again or not at all: a commit
// while the read goes to the database, and a read between a commit and its
// changes to the cache.
func TestCacheFillRace(t *testing.T) {
	ctx := context.Background()
	t.Run("write during the read", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, db testDB) {
			s := open(t, db)
			storeTranscript(t, s, "acme", "s1")
			var once sync.Once
			layer(s).testAfterRead = func() {
				once.Do(func() {
					// The read has its old transcript; this write misses the cache.
					if err := s.AppendMessage(ctx, "acme", "s1", text("u9", "meanwhile")); err != nil {
						t.Error(err)
					}
				})
			}
			if _, msgs, err := s.Transcript(ctx, "acme", "s1"); err != nil || len(msgs) != 4 {
				t.Fatalf("Transcript = %d messages, %v; want the 4 before the write", len(msgs), err)
			}
			if cached(s, "acme", "s1") {
				t.Error("a read older than a write filled the cache")
			}
			assertCoherent(t, db, s, "acme", "s1")
		})
	})
	t.Run("read between commit and cache", func(t *testing.T) {
		forEachDB(t, func(t *testing.T, db testDB) {
			s := open(t, db)
			storeTranscript(t, s, "acme", "s1")
			var armed atomic.Bool
			read := make(chan int, 1)
			layer(s).testAfterCommit = func() {
				if armed.CompareAndSwap(true, false) {
					// The read sees the commit; its Admit has not reached the cache.
					_, msgs, err := s.Transcript(ctx, "acme", "s1")
					if err != nil {
						t.Error(err)
					}
					read <- len(msgs)
				}
			}
			armed.Store(true)
			u9 := text("u9", "hi")
			if _, err := s.Admit(ctx, "acme", "demo", "s1", nil, &u9); err != nil {
				t.Fatal(err)
			}
			if n := <-read; n != 5 {
				t.Errorf("the read after the commit has %d messages, want 5", n)
			}
			assertCoherent(t, db, s, "acme", "s1")
		})
	})
}

// TestCacheCommitFailureResets checks that a failed commit empties the cache.
func TestCacheCommitFailureResets(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	storeTranscript(t, s, "acme", "s1")
	if _, _, err := s.Transcript(ctx, "acme", "s1"); err != nil {
		t.Fatal(err)
	}
	// A deferred foreign key fails at COMMIT.
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO messages (session_pk, position, message_id, role, body, created_at, updated_at)
			VALUES (9999, 1, 'x', 'user', '{}', 0, 0)`)
		return err
	})
	if err == nil {
		t.Fatal("the commit succeeded")
	}
	t.Log(err)
	if n := s.cache.len(); n != 0 {
		t.Errorf("%d entries after a failed commit, want 0", n)
	}
	assertCoherent(t, newSQLiteDB(t, path), s, "acme", "s1")
}

func TestCacheConcurrent(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		const (
			writers  = 32
			readers  = 8
			sessions = 8
			rounds   = 40
		)
		ctx := context.Background()
		s := open(t, db)
		var (
			wg, readWG sync.WaitGroup
			stop       atomic.Bool
		)
		for r := range readers {
			readWG.Go(func() {
				for i := 0; !stop.Load(); i++ {
					_, msgs, err := s.Transcript(ctx, "acme", fmt.Sprint("s", (r+i)%sessions))
					if err != nil && !errors.Is(err, ErrNotFound) {
						t.Error(err)
						return
					}
					// The readers' copies are theirs.
					for j := range msgs {
						msgs[j].ID = "scribbled"
						if len(msgs[j].Parts) > 0 {
							msgs[j].Parts[0].Text = "scribbled"
						}
					}
				}
			})
		}
		for w := range writers {
			wg.Go(func() {
				session := fmt.Sprint("s", w%sessions)
				for j := range rounds {
					u := text(fmt.Sprintf("u%d-%d", w, j), "hi")
					if _, err := s.Admit(ctx, "acme", "demo", session, json.RawMessage(fmt.Sprintf(`{"w":%d}`, w)), &u); err != nil {
						t.Error(err)
						return
					}
					// Every writer of a session upserts the same few ids.
					a := assistant(fmt.Sprintf("a%d", j%5), fmt.Sprintf("answer %d-%d", w, j))
					if err := s.FinishTurn(ctx, "acme", session, a, turnRecord(session, "r")); err != nil {
						t.Error(err)
						return
					}
					err := s.AppendMessage(ctx, "acme", session, text(fmt.Sprintf("x%d", j%7), "maybe"))
					if err != nil && !errors.Is(err, ErrConflict) {
						t.Error(err)
						return
					}
					if j%13 == 0 {
						if err := s.SetLastBody(ctx, "acme", session, nil); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
		stop.Store(true)
		readWG.Wait()
		for i := range sessions {
			assertCoherent(t, db, s, "acme", fmt.Sprint("s", i))
		}
	})
}

// TestTranscriptCopiesAreTheirOwn checks that changing what Transcript
// returns, in every way a caller can, changes nothing the next read returns.
func TestTranscriptCopiesAreTheirOwn(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s := open(t, db)
		storeTranscript(t, s, "acme", "s1")
		if err := s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`{"k":0}`)); err != nil {
			t.Fatal(err)
		}
		mutations := []struct {
			name   string
			mutate func(sess *Session, msgs []engine.UIMessage)
		}{
			{"session fields", func(sess *Session, _ []engine.UIMessage) { sess.Agent, sess.LastBody = "x", nil }},
			{"last body bytes", func(sess *Session, _ []engine.UIMessage) { sess.LastBody[0] = '[' }},
			{"append to the last body", func(sess *Session, _ []engine.UIMessage) { _ = append(sess.LastBody[:1], 'x') }},
			{"append to the slice", func(_ *Session, msgs []engine.UIMessage) { _ = append(msgs[:1], text("x", "x")) }},
			{"replace a message", func(_ *Session, msgs []engine.UIMessage) { msgs[0] = text("x", "x") }},
			{"message fields", func(_ *Session, msgs []engine.UIMessage) { msgs[1].ID, msgs[1].Metadata = "x", nil }},
			{"metadata bytes", func(_ *Session, msgs []engine.UIMessage) { msgs[1].Metadata[0] = '[' }},
			{"replace a part", func(_ *Session, msgs []engine.UIMessage) { msgs[1].Parts[0] = engine.UIPart{Type: "x"} }},
			{"part fields", func(_ *Session, msgs []engine.UIMessage) { msgs[1].Parts[2].State, msgs[1].Parts[2].Output = "x", nil }},
			{"append to parts", func(_ *Session, msgs []engine.UIMessage) {
				_ = append(msgs[0].Parts[:0], engine.UIPart{Type: "x"})
				msgs[0].Parts = append(msgs[0].Parts, engine.UIPart{Type: "y"})
			}},
			{"raw part bytes", func(_ *Session, msgs []engine.UIMessage) {
				p := &msgs[1].Parts[2]
				p.Input[0], p.Output[0] = '[', '['
				_ = append(p.Input[:1], "xxxxxxxx"...)
			}},
			{"data bytes", func(_ *Session, msgs []engine.UIMessage) { msgs[3].Parts[3].Data[0] = '[' }},
		}
		for _, tt := range mutations {
			t.Run(tt.name, func(t *testing.T) {
				sess, msgs, err := s.Transcript(ctx, "acme", "s1")
				if err != nil {
					t.Fatal(err)
				}
				if !cached(s, "acme", "s1") {
					t.Fatal("s1 is not cached")
				}
				tt.mutate(sess, msgs)
				assertCoherent(t, db, s, "acme", "s1")
			})
		}
	})
}

func TestCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	body, err := encodeMessage(text("u1", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	size := len(body) // of each session's one message
	tests := []struct {
		name           string
		entries, bytes int
		want           int // entries left after reading s0…s5 in order
	}{
		{"by entries", 3, 1 << 20, 3},
		{"by bytes", 100, 2*size + 1, 2},
		{"an entry larger than the bound", 100, size - 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachDB(t, func(t *testing.T, db testDB) {
				s := open(t, db, withTranscriptCache(tt.entries, tt.bytes))
				c := layer(s).cache
				for i := range 6 {
					mustSession(t, s, "acme", fmt.Sprint("s", i))
					if err := s.AppendMessage(ctx, "acme", fmt.Sprint("s", i), text("u1", "hello")); err != nil {
						t.Fatal(err)
					}
					if _, _, err := s.Transcript(ctx, "acme", fmt.Sprint("s", i)); err != nil {
						t.Fatal(err)
					}
				}
				if n := c.len(); n != tt.want {
					t.Errorf("%d entries, want %d", n, tt.want)
				}
				for i := range 6 {
					// The most recent ones stay.
					if want := i >= 6-tt.want; cached(s, "acme", fmt.Sprint("s", i)) != want {
						t.Errorf("s%d cached = %t, want %t", i, !want, want)
					}
				}
				c.mu.Lock()
				if c.bytes > tt.bytes || c.lru.Len() != len(c.entries) {
					t.Errorf("%d bytes in %d entries (%d in the map), bound %d", c.bytes, c.lru.Len(), len(c.entries), tt.bytes)
				}
				c.mu.Unlock()
				for i := range 6 {
					assertCoherent(t, db, s, "acme", fmt.Sprint("s", i))
				}
			})
		})
	}
}

// BenchmarkTranscript reads a session of 8 messages: from the cache (hit),
// through the cache when it misses (read, fill and copy), and without it.
func BenchmarkTranscript(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name  string
		cache bool
		miss  bool
	}{{"hit", true, false}, {"miss", true, true}, {"uncached", false, false}} {
		b.Run(bc.name, func(b *testing.B) {
			benchEachDB(b, func(b *testing.B, db testDB) {
				var opts []Option
				if !bc.cache {
					opts = append(opts, withTranscriptCache(0, 0))
				}
				s := open(b, db, opts...)
				data, err := readTestdata()
				if err != nil {
					b.Fatal(err)
				}
				mustSession(b, s, "acme", "s1")
				for i := range 2 {
					for _, m := range data {
						m.ID = fmt.Sprint(m.ID, "-", i)
						if err := s.AppendMessage(ctx, "acme", "s1", m); err != nil {
							b.Fatal(err)
						}
					}
				}
				if _, msgs, err := s.Transcript(ctx, "acme", "s1"); err != nil || len(msgs) != 8 {
					b.Fatalf("Transcript = %d messages, %v; want 8", len(msgs), err)
				}
				k := cacheKey{"acme", "s1"}
				b.ReportAllocs()
				for b.Loop() {
					if bc.miss {
						layer(s).cache.invalidate(k)
					}
					if _, _, err := s.Transcript(ctx, "acme", "s1"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// readTestdata reads testdata/transcript.json (4 messages).
func readTestdata() ([]engine.UIMessage, error) {
	var msgs []engine.UIMessage
	data, err := os.ReadFile("testdata/transcript.json")
	if err != nil {
		return nil, err
	}
	return msgs, json.Unmarshal(data, &msgs)
}

// TestWriteThenAfter checks when the writer runs a write's after: once, after
// its commit and before the write returns; never for a write that failed or
// whose commit failed; and with the values of the run that committed when
// the write ran again.
func TestWriteThenAfter(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// f is the write; lost, when set, is queued after it in the same
		// batch and makes SQLite roll back the transaction.
		f        func(ctx context.Context, tx *sql.Tx) error
		lost     bool
		wantErr  bool
		wantRuns int32
	}{
		{"committed", func(context.Context, *sql.Tx) error { return nil }, false, false, 1},
		{"failed", func(context.Context, *sql.Tx) error { return errBoom }, false, true, 0},
		{"panicked", func(context.Context, *sql.Tx) error { panic(errBoom) }, false, true, 0},
		{"commit failed", func(ctx context.Context, tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `PRAGMA defer_foreign_keys = ON`); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO messages (session_pk, position, message_id, role, body, created_at, updated_at)
				VALUES (9999, 1, 'x', 'user', '{}', 0, 0)`)
			return err
		}, false, true, 0},
		{"ran again", func(context.Context, *sql.Tx) error { return nil }, true, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTest(t)
			var (
				runs, afters atomic.Int32
				seen         int32 // the run the after saw
			)
			f := func(ctx context.Context, tx *sql.Tx) error {
				runs.Add(1)
				return tt.f(ctx, tx)
			}
			after := func() {
				seen = runs.Load()
				afters.Add(1)
			}
			var err error
			if tt.lost {
				release := holdWriter(t, s)
				errs := queue(t, s,
					func() error { return s.writeThen(ctx, f, after) },
					func() error {
						return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
							_, err := tx.ExecContext(ctx, `ROLLBACK`)
							return err
						})
					})
				release()
				err = <-errs[0]
				<-errs[1]
			} else {
				err = s.writeThen(ctx, f, after)
			}
			// No wait: the after has run when the write returns.
			if got := afters.Load(); got != tt.wantRuns {
				t.Errorf("after ran %d times, want %d", got, tt.wantRuns)
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("err = %v, want an error: %t", err, tt.wantErr)
			}
			if tt.lost && runs.Load() != 2 {
				t.Errorf("the write ran %d times, want 2", runs.Load())
			}
			if tt.wantRuns > 0 && seen != runs.Load() {
				t.Errorf("after saw run %d of %d", seen, runs.Load())
			}
		})
	}
}
