package decisions

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy"
)

var quiet = slog.New(slog.DiscardHandler)

func openSQLite(t *testing.T) store.Store {
	t.Helper()
	st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "turngate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// record is a decision record of tenant at t.
func record(tenant string, at time.Time) *policy.Record {
	return &policy.Record{Time: at, Hook: policy.HookBeforeTurn, Tenant: tenant, RequestID: "req-1", SessionID: "s1", Agent: "a",
		Outcome: policy.OutcomeNoMatch, Revision: "sha256:x"}
}

func line(r *policy.Record) []byte {
	b, _ := json.Marshal(r)
	return b
}

func run(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func flush(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, st store.Store) int {
	t.Helper()
	rows, err := st.QueryDecisions(context.Background(), store.DecisionQuery{Limit: store.MaxDecisionPage})
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// TestWriterRetention: records older than the retention are pruned by
// Run, newer ones kept.
func TestWriterRetention(t *testing.T) {
	st := openSQLite(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	w := New(st, Options{Retention: 24 * time.Hour, PruneInterval: 10 * time.Millisecond, Now: func() time.Time { return now }, Logger: quiet})
	for i := range 10 {
		r := record("acme", now.Add(-time.Duration(i)*6*time.Hour)) // 0h … 54h old
		w.Tap(audit.KindDecision, r, line(r))
	}
	run(t, w) // prunes when it starts, perhaps before the records are stored
	flush(t, w)
	// 0, 6, 12, 18 and 24 hours old: the edge is kept.
	for deadline := time.Now().Add(10 * time.Second); count(t, st) != 5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after pruning %d records left, want 5", count(t, st))
		}
	}
}

// TestWriterPruneKeepsUp: one round of pruning deletes batch after batch
// while whole batches come back — more expired records than the round's
// former bound of 20 batches — and stores the records queued meanwhile;
// a round that spent its time budget stops after a batch, bounded.
func TestWriterPruneKeepsUp(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	const batch, expired, recent = 20, 30 * 20, 10 // 30 batches: more than the former bound
	seed := func(t *testing.T) store.Store {
		st := openSQLite(t)
		rows := make([]store.DecisionRow, 0, expired+recent)
		for i := range expired + recent {
			at := now.Add(-48*time.Hour + time.Duration(i)*time.Second)
			if i >= expired {
				at = now.Add(-time.Duration(i-expired) * time.Minute)
			}
			rows = append(rows, store.DecisionRow{Time: at, Tenant: "acme", Hook: policy.HookBeforeTurn, Record: json.RawMessage(`{}`)})
		}
		for i := 0; i < len(rows); i += store.MaxDecisionPage {
			if err := st.InsertDecisions(context.Background(), rows[i:min(i+store.MaxDecisionPage, len(rows))]); err != nil {
				t.Fatal(err)
			}
		}
		return st
	}
	for _, tc := range []struct {
		name    string
		budget  time.Duration
		queued  int
		deleted int
	}{
		{"a round with time to spare clears every expired record", time.Hour, 5, expired},
		{"a round out of time stops after a batch", time.Nanosecond, 0, batch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := seed(t)
			w := New(st, Options{Retention: 24 * time.Hour, PruneBatch: batch, PruneBudget: tc.budget, Now: func() time.Time { return now }, Logger: quiet})
			for i := range tc.queued {
				r := record("acme", now.Add(-time.Duration(i)*time.Second))
				w.Tap(audit.KindDecision, r, line(r))
			}
			if n := w.prune(context.Background()); n != tc.deleted {
				t.Errorf("one round deleted %d records, want %d", n, tc.deleted)
			}
			if w.Pending() != 0 {
				t.Errorf("%d records still queued after the round, want them stored between its batches", w.Pending())
			}
			left, err := st.QueryDecisions(context.Background(), store.DecisionQuery{Until: now.Add(-24 * time.Hour), Limit: store.MaxDecisionPage})
			if err != nil {
				t.Fatal(err)
			}
			if want := min(expired-tc.deleted, store.MaxDecisionPage); len(left) != want {
				t.Errorf("%d expired records left, want %d", len(left), want)
			}
			if n := count(t, st); n != min(expired-tc.deleted+recent+tc.queued, store.MaxDecisionPage) {
				t.Errorf("%d records in the store", n)
			}
		})
	}
}

// TestWriterQueueBound: beyond MaxQueued records are dropped from the
// store (the audit log has them); a record the store refuses is dropped
// alone, the others of its batch stored.
func TestWriterQueueBound(t *testing.T) {
	st := openSQLite(t)
	w := New(st, Options{MaxQueued: 5, Logger: quiet})
	now := time.Now()
	for i := range 8 {
		r := record(fmt.Sprintf("t%d", i), now)
		w.Tap(audit.KindDecision, r, line(r))
	}
	if w.Pending() != 5 {
		t.Fatalf("%d records queued, want the bound 5", w.Pending())
	}
	w.opts.MaxQueued = 10
	bad := record("bad\x00tenant", now)
	w.Tap(audit.KindDecision, bad, line(bad))
	good := record("after", now)
	w.Tap(audit.KindDecision, good, line(good))
	run(t, w)
	flush(t, w)
	if n := count(t, st); n != 6 {
		t.Errorf("stored %d records, want 6 (5 queued and the one after the refused one)", n)
	}
	// A record that is not a hook's is not stored.
	w.Tap(audit.KindTurn, &audit.Turn{}, []byte(`{}`))
	if w.Pending() != 0 {
		t.Error("a turn record was queued")
	}
}

// batchLog is a decision store that records the size of every batch it
// is given and fails the first fail of them. With hold set, a write
// signals entered and waits until hold is closed.
type batchLog struct {
	store.Decisions
	mu      sync.Mutex
	batches []int
	fail    int
	stored  chan struct{}
	entered chan struct{}
	hold    chan struct{}
}

func (b *batchLog) InsertDecisions(ctx context.Context, rows []store.DecisionRow) error {
	b.mu.Lock()
	b.batches = append(b.batches, len(rows))
	failing := len(b.batches) <= b.fail
	b.mu.Unlock()
	if b.hold != nil {
		select {
		case b.entered <- struct{}{}:
		default:
		}
		<-b.hold
	}
	if failing {
		return store.ErrUnavailable
	}
	err := b.Decisions.InsertDecisions(ctx, rows)
	select {
	case b.stored <- struct{}{}:
	default:
	}
	return err
}

// turnRecords are the hook records of one turn without tool calls, in
// the order the audit log writes them.
func turnRecords(at time.Time) []struct {
	kind string
	v    any
} {
	step := 0
	id := audit.Identity{Time: at, RequestID: "req-1", Tenant: "acme", SessionID: "s1", Agent: "a"}
	return []struct {
		kind string
		v    any
	}{
		{audit.KindDecision, record("acme", at)},
		{audit.KindDecision, &policy.Record{Time: at, Hook: policy.HookBeforeStep, Tenant: "acme", RequestID: "req-1", SessionID: "s1",
			Agent: "a", StepNumber: &step, Outcome: policy.OutcomeNoMatch, Revision: "sha256:x"}},
		{audit.KindOnStepFinish, &audit.OnStepFinish{Identity: id}},
		{audit.KindOnChatResponse, &audit.OnChatResponse{Identity: id, Status: "completed"}},
	}
}

// TestWriterLinger: Run stores a turn's records in one batch, lingering
// until its onChatResponse record is queued; a Flush or the end of Run
// ends the linger; a failed write keeps the whole batch and stores it on
// the retry. The linger is an hour, so nothing here depends on timing:
// only the turn's end, a Flush or a cancel can end it.
func TestWriterLinger(t *testing.T) {
	for _, tt := range []struct {
		name string
		// records is how many of a turn's records are tapped.
		records, fail int
		flush         bool
		want          []int
	}{
		{name: "a turn folds into one batch", records: 4, want: []int{4}},
		{name: "flush ends the linger", records: 2, flush: true, want: []int{2}},
		{name: "a failed batch is retried whole", records: 4, fail: 1, flush: true, want: []int{4, 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := &batchLog{Decisions: openSQLite(t), fail: tt.fail, stored: make(chan struct{}, 1)}
			w := New(st, Options{Linger: time.Hour, Logger: quiet})
			run(t, w)
			for _, r := range turnRecords(time.Now())[:tt.records] {
				w.Tap(r.kind, r.v, []byte(`{}`))
			}
			if !tt.flush {
				<-st.stored
			}
			flush(t, w)
			st.mu.Lock()
			defer st.mu.Unlock()
			if !slices.Equal(st.batches, tt.want) {
				t.Errorf("batches of %v records, want %v", st.batches, tt.want)
			}
		})
	}
	// A record of the next turn queued while the last turn's batch is
	// being written waits for the rest of its turn.
	t.Run("a turn queued during a write lingers too", func(t *testing.T) {
		st := &batchLog{Decisions: openSQLite(t), stored: make(chan struct{}, 2), entered: make(chan struct{}, 1), hold: make(chan struct{})}
		w := New(st, Options{Linger: time.Hour, Logger: quiet})
		run(t, w)
		records := turnRecords(time.Now())
		for _, r := range records {
			w.Tap(r.kind, r.v, []byte(`{}`))
		}
		<-st.entered
		w.Tap(records[0].kind, records[0].v, []byte(`{}`))
		close(st.hold)
		<-st.stored
		for _, r := range records[1:] {
			w.Tap(r.kind, r.v, []byte(`{}`))
		}
		<-st.stored
		flush(t, w)
		st.mu.Lock()
		defer st.mu.Unlock()
		if want := []int{4, 4}; !slices.Equal(st.batches, want) {
			t.Errorf("batches of %v records, want %v", st.batches, want)
		}
	})
	t.Run("cancel ends the linger", func(t *testing.T) {
		w := New(openSQLite(t), Options{Linger: time.Hour, Logger: quiet})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		r := turnRecords(time.Now())[0]
		w.Tap(r.kind, r.v, []byte(`{}`))
		cancel()
		<-done
		if w.Pending() != 1 {
			t.Errorf("%d records pending after Run ended, want the one it lingered on", w.Pending())
		}
	})
}

// sessions counts the stored rows by session.
func sessions(t *testing.T, st store.Store) map[string]int {
	t.Helper()
	rows, err := st.QueryDecisions(context.Background(), store.DecisionQuery{Limit: store.MaxDecisionPage})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.SessionID]++
	}
	return out
}

// TestWriterErased: once a session is erased (Erased), none of its
// records reaches the store: not those queued, not those of a write
// storing them at that moment (committed after, or failed and retried),
// not those tapped late with a time before the erasure; another
// session's records, and the erased session's records of a later turn,
// are stored.
func TestWriterErased(t *testing.T) {
	t0 := time.Now()
	rec := func(session string, at time.Time) *policy.Record {
		r := record("acme", at)
		r.SessionID = session
		return r
	}
	for _, tc := range []struct {
		name string
		// inFlight: Erased comes while the first write is held; fail: that
		// write fails.
		inFlight, fail bool
	}{
		{name: "queued"},
		{name: "in flight", inFlight: true},
		{name: "in flight, failed", inFlight: true, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openSQLite(t)
			b := &batchLog{Decisions: st, stored: make(chan struct{}, 1), entered: make(chan struct{}, 1), hold: make(chan struct{})}
			if tc.fail {
				b.fail = 1
			}
			w := New(b, Options{Logger: quiet, Linger: -1})
			if !tc.inFlight {
				close(b.hold)
			}
			for _, s := range []string{"erased", "kept"} {
				r := rec(s, t0)
				w.Tap(audit.KindDecision, r, line(r))
			}
			if tc.inFlight {
				run(t, w)
				<-b.entered // the write of both records is held
				w.Erased("acme", "erased")
				close(b.hold)
			} else {
				w.Erased("acme", "erased")
				run(t, w)
			}
			// Late from the audit log's queue: dropped; a later turn's: stored.
			late, later := rec("erased", t0), rec("erased", time.Now().Add(time.Second))
			w.Tap(audit.KindDecision, late, line(late))
			w.Tap(audit.KindDecision, later, line(later))
			if tc.fail {
				// The failed write's "kept" record is retried, once the retry's delay is past.
				other := rec("other", t0)
				w.Tap(audit.KindDecision, other, line(other))
			}
			flush(t, w)
			want := map[string]int{"erased": 1, "kept": 1}
			if tc.fail {
				want["other"] = 1
			}
			if got := sessions(t, st); !maps.Equal(got, want) {
				t.Errorf("stored rows by session %v, want %v", got, want)
			}
		})
	}
}
