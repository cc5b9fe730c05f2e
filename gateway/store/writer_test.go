package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

// holdWriter queues a write that blocks the writer until the returned
// release is called, and returns once that write runs: the writes queued
// meanwhile then form the writer's next batch.
func holdWriter(t *testing.T, s *SQLite) (release func()) {
	t.Helper()
	running, unblock, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.write(context.Background(), func(context.Context, *sql.Tx) error {
			close(running)
			<-unblock
			return nil
		})
	}()
	<-running
	return func() {
		t.Helper()
		close(unblock)
		if err := <-done; err != nil {
			t.Errorf("the holding write: %v", err)
		}
	}
}

// waitQueued waits until n writes are queued for the writer.
func waitQueued(t *testing.T, s *SQLite, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.writes) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued after 10 s, want %d", len(s.writes), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// queue starts each write in its own goroutine, in order (each is queued
// before the next starts), and returns a channel per write with its error.
func queue(t *testing.T, s *SQLite, writes ...func() error) []chan error {
	t.Helper()
	errs := make([]chan error, len(writes))
	for i, w := range writes {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- w() }()
		waitQueued(t, s, i+1)
	}
	return errs
}

// turnRecord is a completed turn of acme's session.
func turnRecord(session, requestID string) *TurnRecord {
	return &TurnRecord{RequestID: requestID, Tenant: "acme", SessionID: session, Agent: "demo", Status: "completed",
		FinishReason: "stop", Usage: engine.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}}
}

func TestGroupCommitConcurrentTurns(t *testing.T) {
	const (
		sessions = 64
		turns    = 10
		writes   = sessions * turns * 2 // Admit and FinishTurn
	)
	ctx := context.Background()
	s, _ := openTest(t)
	before := s.commits.Load()
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for i := range sessions {
		wg.Go(func() {
			session := fmt.Sprintf("s%d", i)
			for j := range turns {
				u := text(fmt.Sprintf("u%d", j), "hi")
				if _, err := s.Admit(ctx, "acme", "demo", session, nil, &u); err != nil {
					errs <- err
					return
				}
				if err := s.FinishTurn(ctx, "acme", session, assistant(fmt.Sprintf("a%d", j), "hello"),
					turnRecord(session, fmt.Sprint(j))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range sessions {
		session := fmt.Sprintf("s%d", i)
		msgs, err := s.Messages(ctx, "acme", session)
		if err != nil || len(msgs) != 2*turns {
			t.Errorf("%s has %d messages (%v), want %d", session, len(msgs), err, 2*turns)
		}
		recs, err := s.Turns(ctx, "acme", session)
		if err != nil || len(recs) != turns {
			t.Errorf("%s has %d turns (%v), want %d", session, len(recs), err, turns)
		}
	}
	commits := s.commits.Load() - before
	t.Logf("%d writes in %d commits", writes, commits)
	if commits >= writes {
		t.Errorf("%d writes took %d commits, want fewer", writes, commits)
	}
}

// errBoom is the panic of a failing write.
var errBoom = errors.New("boom")

func TestBatchFailuresAreTheirOwn(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	u0, u1, u2 := text("u0", "first"), text("u1", "second"), text("u2", "third")
	if _, err := s.Admit(ctx, "acme", "demo", "s1", nil, &u0); err != nil {
		t.Fatal(err)
	}
	// The writes of one batch, in order; the failing ones are between the
	// others, and each later write sees the stored ones before it.
	batch := []struct {
		name  string
		write func() error
		want  error
	}{
		{"admit", func() error { _, err := s.Admit(ctx, "acme", "demo", "s1", nil, &u1); return err }, nil},
		{"append a duplicate", func() error { return s.AppendMessage(ctx, "acme", "s1", u0) }, ErrConflict},
		{"append to a missing session", func() error { return s.AppendMessage(ctx, "acme", "nope", u2) }, ErrNotFound},
		{"panic after writing", func() error {
			return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
				m := text("p1", "never stored")
				body, err := encodeMessage(m)
				if err != nil {
					return err
				}
				if err := s.putMessageTx(ctx, tx, "acme", "s1", m, body, nanos(now()), false); err != nil {
					return err
				}
				panic(errBoom)
			})
		}, errBoom},
		{"finish turn", func() error {
			return s.FinishTurn(ctx, "acme", "s1", assistant("a1", "answer"), turnRecord("s1", "r1"))
		}, nil},
		{"finish turn of another session's record", func() error {
			return s.FinishTurn(ctx, "acme", "s1", assistant("a2", "answer"), turnRecord("s2", "r2"))
		}, ErrInvalid},
		{"append", func() error { return s.AppendMessage(ctx, "acme", "s1", u2) }, nil},
	}
	before := s.commits.Load()
	release := holdWriter(t, s)
	var writes []func() error
	for _, w := range batch {
		if w.want != ErrInvalid { // refused before it queues
			writes = append(writes, w.write)
		}
	}
	errs := queue(t, s, writes...)
	release()
	i := 0
	for _, w := range batch {
		var err error
		if w.want == ErrInvalid {
			err = w.write()
		} else {
			err = <-errs[i]
			i++
		}
		if !errors.Is(err, w.want) || (w.want == nil) != (err == nil) {
			t.Errorf("%s: err = %v, want %v", w.name, err, w.want)
		}
	}
	if got := s.commits.Load() - before; got != 2 {
		t.Errorf("%d commits, want 2 (the holding write, then the batch)", got)
	}
	msgs, err := s.Messages(ctx, "acme", "s1")
	if err != nil {
		t.Fatal(err)
	}
	assertJSON(t, msgs, []engine.UIMessage{u0, u1, assistant("a1", "answer"), u2})
	if recs, err := s.Turns(ctx, "acme", "s1"); err != nil || len(recs) != 1 {
		t.Errorf("Turns = %+v, %v; want r1", recs, err)
	}
	// The writer survived the panic.
	if err := s.AppendMessage(ctx, "acme", "s1", text("u3", "later")); err != nil {
		t.Errorf("AppendMessage after the batch: %v", err)
	}
}

func TestLonePanicRollsBack(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	mustSession(t, s, "acme", "s1")
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.StmtContext(ctx, s.q.setLastBody).ExecContext(ctx, `{"x":1}`, 1, "acme", "s1"); err != nil {
			return err
		}
		panic("boom")
	})
	if err == nil {
		t.Fatal("a panicking write succeeded")
	}
	t.Log(err)
	sess, err := s.GetSession(ctx, "acme", "s1")
	if err != nil || sess.LastBody != nil {
		t.Errorf("session after the panic = %+v, %v; want no last body", sess, err)
	}
	if err := s.AppendMessage(ctx, "acme", "s1", text("u1", "hi")); err != nil {
		t.Errorf("AppendMessage after the panic: %v", err)
	}
}

func TestQueuedWriteCancelled(t *testing.T) {
	s, _ := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	var ran atomic.Bool
	release := holdWriter(t, s)
	errs := queue(t, s, func() error {
		return s.write(ctx, func(context.Context, *sql.Tx) error {
			ran.Store(true)
			return nil
		})
	})
	cancel()
	if err := <-errs[0]; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled queued write: err = %v, want context.Canceled", err)
	}
	release()
	// Writes run in order: once this one is done, the writer has passed the
	// cancelled one.
	mustSession(t, s, "acme", "s1")
	if ran.Load() {
		t.Error("the cancelled write ran")
	}
}

// TestLostTransactionRunsOthersAgain checks the writes that share a batch
// with one whose failure makes SQLite roll back the whole transaction: they
// run again and are stored, and only the culprit fails.
func TestLostTransactionRunsOthersAgain(t *testing.T) {
	tests := []struct {
		name string
		// culprit is the middle write of the batch; cancel cancels its
		// context.
		culprit func(ctx context.Context, cancel context.CancelFunc, tx *sql.Tx) error
	}{
		{
			// A statement interrupted through a cancellable context rolls
			// back the transaction (SQLite's sqlite3_interrupt). The store's
			// own writes never are (write runs them without cancel); a
			// write that uses the caller's context itself can be.
			name: "statement interrupted by its context",
			culprit: func(ctx context.Context, cancel context.CancelFunc, tx *sql.Tx) error {
				time.AfterFunc(20*time.Millisecond, cancel)
				_, err := tx.ExecContext(ctx, `UPDATE sessions SET updated_at = (
					WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000)
					SELECT COUNT(*) FROM c)`)
				return err
			},
		},
		{
			// A ROLLBACK stands in for the I/O errors after which SQLite
			// rolls back by itself.
			name: "rolled back by SQLite",
			culprit: func(ctx context.Context, _ context.CancelFunc, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `UPDATE sessions SET last_body = '1'`); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, `ROLLBACK`)
				return errors.Join(errors.New("lost the transaction"), err)
			},
		},
		{
			// The same, without telling: its RELEASE fails.
			name: "rolled back by SQLite without an error",
			culprit: func(ctx context.Context, _ context.CancelFunc, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `ROLLBACK`)
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bg := context.Background()
			s, _ := openTest(t)
			mustSession(t, s, "acme", "s1")
			before := s.commits.Load()
			release := holdWriter(t, s)
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			var runs atomic.Int32 // of the first write
			errs := queue(t, s,
				func() error {
					return s.write(bg, func(_ context.Context, tx *sql.Tx) error {
						runs.Add(1)
						return s.putMessageTx(bg, tx, "acme", "s1", text("u1", "hi"), `{"id":"u1","role":"user"}`, nanos(now()), false)
					})
				},
				func() error {
					return s.write(ctx, func(_ context.Context, tx *sql.Tx) error { return tt.culprit(ctx, cancel, tx) })
				},
				func() error { return s.AppendMessage(bg, "acme", "s1", text("u2", "there")) },
			)
			release()
			if err := <-errs[1]; err == nil {
				t.Error("the culprit succeeded")
			} else {
				t.Logf("the culprit: %v", err)
			}
			for _, i := range []int{0, 2} {
				if err := <-errs[i]; err != nil {
					t.Errorf("write %d: %v", i, err)
				}
			}
			if n := runs.Load(); n != 2 {
				t.Errorf("the first write ran %d times, want 2", n)
			}
			msgs, err := s.Messages(bg, "acme", "s1")
			if err != nil || len(msgs) != 2 || msgs[0].ID != "u1" || msgs[1].ID != "u2" {
				t.Errorf("messages = %v (%v), want u1, u2", ids(msgs), err)
			}
			if sess, err := s.GetSession(bg, "acme", "s1"); err != nil || sess.LastBody != nil {
				t.Errorf("session = %+v, %v; want the culprit's write undone", sess, err)
			}
			if got := s.commits.Load() - before; got != 2 {
				t.Errorf("%d commits, want 2 (the holding write, then the others again)", got)
			}
		})
	}
}

func TestCloseWithConcurrentWriters(t *testing.T) {
	const writers = 64
	s, _ := openTest(t)
	var (
		wg   sync.WaitGroup
		errs = make(chan error, writers)
		ok   atomic.Int64
	)
	for i := range writers {
		wg.Go(func() {
			session := fmt.Sprintf("s%d", i)
			for j := 0; ; j++ {
				u := text(fmt.Sprint(j), "hi")
				if _, err := s.Admit(context.Background(), "acme", "demo", session, nil, &u); err != nil {
					errs <- err
					return
				}
				ok.Add(1)
			}
		})
	}
	for ok.Load() < writers {
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("writers still running 10 s after Close")
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, errClosed) {
			t.Errorf("write during Close: %v, want errClosed", err)
		}
	}
	if err := s.RecordTurn(context.Background(), turnRecord("s1", "r")); !errors.Is(err, errClosed) {
		t.Errorf("RecordTurn after Close: %v, want errClosed", err)
	}
}

// BenchmarkAdmitParallel measures a turn's two writes, Admit and FinishTurn,
// from 64 concurrent sessions: SQLite's writer throughput with group commit
// (on disk and on tmpfs), PostgreSQL's with concurrent transactions.
// commits/write is the share of SQLite's writes that paid a commit of their
// own.
func BenchmarkAdmitParallel(b *testing.B) {
	const sessions = 64
	dbs := []testDriver{{"sqlite-disk", freshSQLite}}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dbs = append(dbs, testDriver{"sqlite-shm", func(b testing.TB) testDB {
			dir, err := os.MkdirTemp("/dev/shm", "store-bench-")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) })
			return newSQLiteDB(b, filepath.Join(dir, "t.db"))
		}})
	}
	dbs = append(dbs, testDriver{"postgres", freshPostgres})
	for _, d := range dbs {
		b.Run(d.name, func(b *testing.B) {
			s := open(b, d.fresh(b))
			sq, _ := s.(*SQLite)
			var before int64
			if sq != nil {
				before = sq.commits.Load()
			}
			ctx := context.Background()
			body := []byte(`{"locale":"fr"}`)
			var next atomic.Int64
			b.SetParallelism((sessions + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer() // b.N grows over several calls, each opening a fresh database first
			b.RunParallel(func(pb *testing.PB) {
				session := fmt.Sprint(next.Add(1))
				u := text("", "What is the weather in Paris today, and should I take an umbrella?")
				a := assistant("", "It will rain in Paris this afternoon; take an umbrella.")
				rec := turnRecord(session, "r")
				for i := 0; pb.Next(); i++ {
					u.ID, a.ID = fmt.Sprint("u", i), fmt.Sprint("a", i)
					if _, err := s.Admit(ctx, "acme", "demo", session, body, &u); err != nil {
						b.Error(err)
						return
					}
					if err := s.FinishTurn(ctx, "acme", session, a, rec); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if sq != nil {
				b.ReportMetric(float64(sq.commits.Load()-before)/float64(2*b.N), "commits/write")
			}
		})
	}
}

// TestStartedWriteOutlivesItsCaller checks that a write whose caller gives
// up after it started runs to its end: its statements do not see the
// cancellation, it is stored, and the caller is told so.
func TestStartedWriteOutlivesItsCaller(t *testing.T) {
	s, _ := openTest(t)
	mustSession(t, s, "acme", "s1")
	ctx, cancel := context.WithCancel(context.Background())
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		cancel()
		if ctx.Err() != nil {
			return fmt.Errorf("the write's statements see the caller's cancellation: %w", ctx.Err())
		}
		return s.putMessageTx(ctx, tx, "acme", "s1", text("u1", "hi"), `{"id":"u1","role":"user","parts":[]}`, nanos(now()), false)
	})
	if err != nil {
		t.Fatalf("write = %v, want nil: it had started", err)
	}
	if msgs, err := s.Messages(context.Background(), "acme", "s1"); err != nil || len(msgs) != 1 {
		t.Errorf("Messages = %v, %v; want the started write stored", msgs, err)
	}
}
