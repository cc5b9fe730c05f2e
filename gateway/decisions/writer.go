// Package decisions is the queryable decision store: every hook's audit
// record (the decision hooks' decision records and the observation hooks'
// records) is also kept in the gateway's store, indexed for the admin
// API's decisions list, a decision's record, a turn's timeline and replay
// over a time range. The JSONL audit log stays the record of truth and is
// written as before; this package only copies what it writes.
//
// Records reach the store off the request path: the audit log's writer
// hands each written line to Writer.Tap, which queues it; Writer.Run
// lingers a little for the records still to come of the turns it has
// records of (up to Options.Linger, until a turn's onChatResponse record
// is queued, a batch is full or Flush asks) and stores the queue in
// batches (on SQLite one request of the writer's
// group commit, on PostgreSQL one statement per batch) and prunes what is
// older than the retention, a bounded batch at a time. A store outage
// holds the records in memory, up to MaxQueued, and stores them once the
// store answers again; beyond that bound records are dropped from the
// store only (the JSONL log has them), counted and logged. An erased
// session's records the writer still holds are dropped, and those a write
// may have stored after the erasure deleted once more (Writer.Erased).
package decisions

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/metrics"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy"
)

// Bounds of the writer. MaxQueued holds about a minute of a busy
// gateway's records (a few thousand turns, each with a handful of hooks)
// in tens of megabytes at most; a batch of maxBatch rows is one insert.
const (
	// DefaultMaxQueued bounds the records waiting for the store.
	DefaultMaxQueued = 65536
	maxBatch         = 512
	// DefaultPruneBatch bounds the rows one prune statement deletes, so
	// the store's writer (SQLite's) is never held for long.
	DefaultPruneBatch = 5000
	// DefaultPruneBudget bounds one round of pruning: batch after batch
	// while whole batches come back, until this much time has gone by.
	DefaultPruneBudget = 15 * time.Second
	// The retry delays after a failed write.
	minRetry = 100 * time.Millisecond
	maxRetry = 10 * time.Second
	// DefaultLinger bounds how long a queued record waits for the rest of
	// its turn's records: a turn's records are stored in one batch once
	// its onChatResponse record is queued, and a record of a turn still
	// running (streaming, waiting for an approval) reaches the store this
	// late at most.
	DefaultLinger = 250 * time.Millisecond
	// erasedWindow is how long the writer remembers a session it wrote
	// rows of, and one that was erased: longer than an erasure's
	// notification takes to reach every replica.
	erasedWindow = time.Minute
)

// Options configure a Writer.
type Options struct {
	// Retention is how long a stored record is kept; 0 keeps them all.
	Retention time.Duration
	// PruneInterval is how often Run prunes (default a minute).
	PruneInterval time.Duration
	// PruneBatch bounds the rows one prune statement deletes (default
	// DefaultPruneBatch).
	PruneBatch int
	// PruneBudget bounds the time one round of pruning goes on (default
	// DefaultPruneBudget); the next round goes on from there.
	PruneBudget time.Duration
	// MaxQueued bounds the records waiting for the store (default
	// DefaultMaxQueued).
	MaxQueued int
	// Linger bounds how long Run waits after a record is queued for the
	// rest of its turn's records before storing them (default
	// DefaultLinger; negative: no wait).
	Linger time.Duration
	// Now is the clock of the retention (default time.Now).
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Writer copies the audit log's hook records into the store. Create it
// with New, give Tap to audit.Log.SetTap, and Run it.
type Writer struct {
	st   store.Decisions
	opts Options

	mu      sync.Mutex
	pending []store.DecisionRow
	// posted and stored count the records queued and those that left the
	// queue (stored or dropped); progress is closed and replaced whenever
	// stored moves.
	posted, stored uint64
	progress       chan struct{}
	// overflowing is set while records are dropped for a full queue,
	// failing while writes fail: each is logged once when it starts.
	overflowing, failing bool
	// turnEnded is set when a turn's last hook record (onChatResponse) is
	// queued, and cleared when a batch takes the whole queue: it ends the
	// linger.
	turnEnded bool
	// flushing counts the Flush calls waiting: they end the linger too.
	flushing int
	wake     chan struct{}

	// inflight is how many rows at the front of pending a write is
	// storing: Erased leaves them be.
	inflight int
	// written holds, by session, when a write of its rows last ended.
	written map[sessionKey]time.Time
	// erased holds the sessions erased in the last erasedWindow: the
	// records of theirs Tap gets that are not newer than the erasure are
	// not queued.
	erased map[sessionKey]erasedAt
	// again holds the sessions whose rows a write may have stored after
	// their erasure: they are deleted once more after it.
	again map[sessionKey]struct{}
	// swept is when written and erased last lost their old entries.
	swept time.Time
}

// sessionKey names a session of a tenant.
type sessionKey struct{ tenant, session string }

func keyOf(r *store.DecisionRow) sessionKey { return sessionKey{r.Tenant, r.SessionID} }

// erasedAt is when the writer heard of a session's erasure: before, on
// the records' clock (Options.Now), seen on the process's.
type erasedAt struct{ before, seen time.Time }

// New returns a Writer storing into st.
func New(st store.Decisions, opts Options) *Writer {
	if opts.PruneInterval <= 0 {
		opts.PruneInterval = time.Minute
	}
	if opts.PruneBatch <= 0 {
		opts.PruneBatch = DefaultPruneBatch
	}
	if opts.PruneBudget <= 0 {
		opts.PruneBudget = DefaultPruneBudget
	}
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = DefaultMaxQueued
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Writer{st: st, opts: opts, progress: make(chan struct{}), wake: make(chan struct{}, 1),
		written: map[sessionKey]time.Time{}, erased: map[sessionKey]erasedAt{}, again: map[sessionKey]struct{}{}}
}

// Tap is the audit.Tap that queues the hook records: decision records and
// the observation hooks' records; turn, approval, kill switch and chain
// records are not hook records and are left out.
func (w *Writer) Tap(kind string, v any, line []byte) {
	row, ok := Row(kind, v)
	if !ok {
		return
	}
	row.Record = append([]byte(nil), line...)
	w.mu.Lock()
	if w.isErased(&row) {
		w.mu.Unlock() // a record of an erased session, late from the audit log's queue
		return
	}
	if len(w.pending) >= w.opts.MaxQueued {
		first := !w.overflowing
		w.overflowing = true
		w.mu.Unlock()
		if first {
			w.opts.Logger.Error("decision store: queue full, records are dropped from the store until it drains (the JSONL audit log has them)",
				"maxQueued", w.opts.MaxQueued)
		}
		if m := w.opts.Metrics; m != nil {
			m.DecisionRecords.WithLabelValues("dropped").Inc()
		}
		return
	}
	w.pending = append(w.pending, row)
	w.posted++
	w.turnEnded = w.turnEnded || kind == audit.KindOnChatResponse
	n := len(w.pending)
	w.mu.Unlock()
	if m := w.opts.Metrics; m != nil {
		m.DecisionsPending.Set(float64(n))
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Row returns the indexed columns of a record the audit log wrote (kind
// and v as audit.Tap gets them), without its Record; false for a record
// that is not a hook's.
func Row(kind string, v any) (store.DecisionRow, bool) {
	switch r := v.(type) {
	case *policy.Record:
		row := store.DecisionRow{Time: r.Time, Tenant: r.Tenant, Agent: r.Agent, SessionID: r.SessionID, RequestID: r.RequestID,
			Hook: r.Hook, Tool: r.ToolName, ToolCallID: r.ToolCallID, Outcome: r.Outcome, Revision: r.Revision,
			ShadowChanged: r.Shadow != nil && r.Shadow.Changed, RulesFired: r.RulesFired}
		if r.StepNumber != nil {
			n := *r.StepNumber
			row.Step = &n
		}
		if r.Hook == policy.HookBeforeToolCall {
			row.Action = toolAction(r)
		}
		return row, true
	case *audit.AfterToolCall:
		step := r.StepNumber
		return observed(kind, r.Identity, store.DecisionRow{Tool: r.ToolName, ToolCallID: r.ToolCallID, Step: &step, Action: r.Decision}), true
	case *audit.OnStepFinish:
		step := r.StepNumber
		return observed(kind, r.Identity, store.DecisionRow{Step: &step}), true
	case *audit.OnChatResponse:
		return observed(kind, r.Identity, store.DecisionRow{}), true
	}
	return store.DecisionRow{}, false
}

// observed fills row in from an observation record's identity.
func observed(hook string, id audit.Identity, row store.DecisionRow) store.DecisionRow {
	row.Time, row.Tenant, row.Agent, row.SessionID, row.RequestID, row.Hook = id.Time, id.Tenant, id.Agent, id.SessionID, id.RequestID, hook
	return row
}

// toolAction is what a beforeToolCall record decided for its call: the
// decision's action, "error" for a failed evaluation without one, and
// allow when no rule decided anything.
func toolAction(r *policy.Record) string {
	switch d := r.Decision.(type) {
	case *engine.ToolCallDecision:
		if d != nil && d.Action != "" {
			return d.Action
		}
	case engine.ToolCallDecision:
		if d.Action != "" {
			return d.Action
		}
	}
	if r.Outcome == policy.OutcomeError {
		return policy.OutcomeError
	}
	return engine.ActionAllow
}

// Run stores the queued records and prunes the old ones until ctx is
// done. Flush before cancelling it stores what is queued.
func (w *Writer) Run(ctx context.Context) {
	prune := time.NewTicker(w.opts.PruneInterval)
	defer prune.Stop()
	w.prune(ctx)
	retry := minRetry
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			w.linger(ctx)
		case <-timer:
		case <-prune.C:
			w.prune(ctx)
			continue
		}
		timer = nil
		if err := w.drain(ctx); err != nil {
			timer = time.After(retry)
			retry = min(2*retry, maxRetry)
			continue
		}
		retry = minRetry
	}
}

// linger waits, at most Options.Linger, for the rest of the queued
// records' turns, so that a turn's records are stored in one batch: until
// a turn's onChatResponse record is queued, maxBatch records are, a Flush
// waits or ctx is done.
func (w *Writer) linger(ctx context.Context) {
	if w.opts.Linger < 0 {
		return
	}
	t := time.NewTimer(w.opts.Linger)
	defer t.Stop()
	for {
		w.mu.Lock()
		ready := w.turnEnded || w.flushing > 0 || len(w.pending) >= maxBatch || len(w.again) > 0
		w.mu.Unlock()
		if ready {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-w.wake:
		}
	}
}

// drain stores the records queued when it starts, batch by batch, until
// they are stored or a write fails. Records queued meanwhile wait for Run's
// next round (their Tap woke it), which lingers for the rest of their
// turns.
func (w *Writer) drain(ctx context.Context) error {
	if err := w.eraseAgain(ctx); err != nil {
		return err
	}
	w.mu.Lock()
	left := len(w.pending)
	w.mu.Unlock()
	for left > 0 {
		w.mu.Lock()
		batch := append([]store.DecisionRow(nil), w.pending[:min(len(w.pending), left, maxBatch)]...)
		if len(batch) == len(w.pending) {
			w.turnEnded = false // no ended turn's record is left behind
		}
		w.inflight = len(batch)
		w.mu.Unlock()
		left -= len(batch)
		if len(batch) == 0 {
			return nil
		}
		err := w.st.InsertDecisions(ctx, batch)
		refused := errors.Is(err, store.ErrInvalid)
		if refused {
			err = w.oneByOne(ctx, batch) // takes its rows off the queue itself
		}
		w.landed(batch)
		var again error
		if err == nil {
			// Before done, so that a Flush waiting for these rows waits
			// for the delete too.
			again = w.eraseAgain(ctx)
		}
		if err == nil && !refused {
			w.done(len(batch), "stored")
		}
		w.mu.Lock()
		w.inflight = 0 // a failed write's rows are no longer being stored
		w.mu.Unlock()
		if err == nil {
			err = again
		}
		if err != nil {
			w.mu.Lock()
			first := !w.failing
			w.failing = true
			n := len(w.pending)
			w.mu.Unlock()
			if first && ctx.Err() == nil {
				w.opts.Logger.Error("decision store: storing records failed; they wait in memory and are retried (the JSONL audit log has them)",
					"pending", n, "err", err)
			}
			return err
		}
	}
	return nil
}

// Erased tells w that the tenant's session was erased (on any replica: a
// ChannelErased notification, or this replica's erasure), so that none of
// its hook records reappears in the store after the erasure deleted them.
// The records of the session w holds are of turns that ran before: the
// erasure took the session's turn lock, and a turn after it is this
// call's news at the earliest (barring one started in the moment the
// notification takes). So:
//
//   - the queued ones not being stored are dropped here, and the ones Tap
//     gets from now on (late from the audit log's own queue), when not
//     newer than now (on the records' clock): a later turn's are kept;
//   - a write storing some of them right now may commit before the
//     erasure or after it: its rows are deleted once more (EraseDecisions)
//     after it ends, committed or failed, and a failed one's rows of the
//     session are dropped rather than retried;
//   - a write that stored some of them in the last erasedWindow may have
//     committed after the erasure, the notification on its way: the
//     session's rows are deleted once more too.
//
// The delete runs on Run's goroutine, which does every write, so no write
// of the erased records follows it; a failed delete is retried like a
// failed write.
func (w *Writer) Erased(tenant, sessionID string) {
	k := sessionKey{tenant, sessionID}
	now := time.Now()
	w.mu.Lock()
	w.sweep(now)
	w.erased[k] = erasedAt{before: w.opts.Now(), seen: now}
	if at, ok := w.written[k]; (ok && now.Sub(at) < erasedWindow) ||
		slices.ContainsFunc(w.pending[:w.inflight], func(r store.DecisionRow) bool { return keyOf(&r) == k }) {
		w.again[k] = struct{}{}
	}
	w.dropErased(w.inflight, func(r *store.DecisionRow) bool { return keyOf(r) == k && w.isErased(r) })
	again := len(w.again) > 0
	w.mu.Unlock()
	if again {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// isErased reports whether r is a record of an erased session, not newer
// than its erasure. Call it with w.mu held.
func (w *Writer) isErased(r *store.DecisionRow) bool {
	e, ok := w.erased[keyOf(r)]
	return ok && !r.Time.After(e.before)
}

// dropErased drops the rows after the first from (those not being
// stored) that erased matches; they count as having left the queue. Call
// it with w.mu held.
func (w *Writer) dropErased(from int, erased func(*store.DecisionRow) bool) {
	kept := w.pending[:from]
	for i := from; i < len(w.pending); i++ {
		if !erased(&w.pending[i]) {
			kept = append(kept, w.pending[i])
		}
	}
	n := len(w.pending) - len(kept)
	if n == 0 {
		return
	}
	clear(w.pending[len(kept):])
	w.pending = kept
	w.stored += uint64(n)
	close(w.progress)
	w.progress = make(chan struct{})
	if m := w.opts.Metrics; m != nil {
		m.DecisionsPending.Set(float64(len(w.pending)))
	}
}

// landed notes that a write of batch, stored or not, ended now.
func (w *Writer) landed(batch []store.DecisionRow) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range batch {
		w.written[keyOf(&batch[i])] = now
	}
	w.sweep(now)
}

// sweep forgets, at most once per erasedWindow, the writes and erasures
// older than it. Call it with w.mu held.
func (w *Writer) sweep(now time.Time) {
	if now.Sub(w.swept) < erasedWindow {
		return
	}
	w.swept = now
	maps.DeleteFunc(w.written, func(_ sessionKey, at time.Time) bool { return now.Sub(at) >= erasedWindow })
	maps.DeleteFunc(w.erased, func(k sessionKey, e erasedAt) bool {
		_, again := w.again[k] // its failed write's rows wait to be dropped
		return !again && now.Sub(e.seen) >= erasedWindow
	})
}

// eraseAgain deletes once more the rows of the sessions erased while a
// write stored rows of theirs, or soon after (see Erased), after dropping
// their queued rows not being stored (a failed write's among them). Run's
// goroutine calls it before a drain and after each write.
func (w *Writer) eraseAgain(ctx context.Context) error {
	w.mu.Lock()
	keys := slices.Collect(maps.Keys(w.again))
	w.dropErased(w.inflight, func(r *store.DecisionRow) bool { _, ok := w.again[keyOf(r)]; return ok && w.isErased(r) })
	w.mu.Unlock()
	for _, k := range keys {
		if err := w.st.EraseDecisions(ctx, k.tenant, k.session); err != nil {
			return err
		}
		w.mu.Lock()
		delete(w.again, k)
		w.mu.Unlock()
	}
	return nil
}

// oneByOne stores the rows of a batch the store refused one at a time,
// dropping those it refuses (logged, counted) so that one bad row does not
// hold the others back.
func (w *Writer) oneByOne(ctx context.Context, batch []store.DecisionRow) error {
	stored := 0
	for i := range batch {
		err := w.st.InsertDecisions(ctx, batch[i:i+1])
		if errors.Is(err, store.ErrInvalid) {
			w.opts.Logger.Error("decision store: a record was refused and is not stored (the JSONL audit log has it)",
				"hook", batch[i].Hook, "requestId", batch[i].RequestID, "err", err)
			if m := w.opts.Metrics; m != nil {
				m.DecisionRecords.WithLabelValues("dropped").Inc()
			}
			continue
		}
		if err != nil {
			// The rows before i are stored or dropped: they leave the queue.
			w.done(i, "")
			w.count(stored)
			return err
		}
		stored++
	}
	w.done(len(batch), "")
	w.count(stored)
	return nil
}

// done takes n stored rows off the front of the queue and counts them
// under outcome ("" counts them elsewhere).
func (w *Writer) done(n int, outcome string) {
	w.mu.Lock()
	w.pending = append(w.pending[:0], w.pending[n:]...)
	w.inflight = max(0, w.inflight-n)
	left := len(w.pending)
	w.stored += uint64(n)
	if w.failing {
		w.failing = false
		w.opts.Logger.Info("decision store: storing records again", "pending", left)
	}
	if w.overflowing && left < w.opts.MaxQueued/2 {
		w.overflowing = false
	}
	close(w.progress)
	w.progress = make(chan struct{})
	w.mu.Unlock()
	if m := w.opts.Metrics; m != nil {
		if outcome != "" {
			m.DecisionRecords.WithLabelValues(outcome).Add(float64(n))
		}
		m.DecisionsPending.Set(float64(left))
	}
}

// count counts n stored rows.
func (w *Writer) count(n int) {
	if m := w.opts.Metrics; m != nil {
		m.DecisionRecords.WithLabelValues("stored").Add(float64(n))
	}
}

// Flush returns once every record queued before it has left the queue,
// or ctx's error. Run does not linger while a Flush waits.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	target := w.posted
	w.flushing++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.flushing--
		w.mu.Unlock()
	}()
	for {
		w.mu.Lock()
		stored, progress := w.stored, w.progress
		w.mu.Unlock()
		if stored >= target {
			return nil
		}
		select {
		case w.wake <- struct{}{}:
		default:
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Pending returns how many records wait for the store.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// prune deletes the records older than the retention, a bounded batch
// (Options.PruneBatch) at a time, batch after batch while whole batches
// come back, until Options.PruneBudget is spent (the next round goes on);
// the records queued meanwhile are stored between batches. It returns how
// many records it deleted.
func (w *Writer) prune(ctx context.Context) int {
	if w.opts.Retention <= 0 {
		return 0
	}
	before := w.opts.Now().Add(-w.opts.Retention)
	end := time.Now().Add(w.opts.PruneBudget)
	deleted := 0
	for {
		n, err := w.st.PruneDecisions(ctx, before, w.opts.PruneBatch)
		deleted += n
		if err != nil {
			if ctx.Err() == nil {
				w.opts.Logger.Warn("decision store: pruning failed; the next round retries", "err", err)
			}
			return deleted
		}
		if n < w.opts.PruneBatch {
			return deleted
		}
		if !time.Now().Before(end) {
			w.opts.Logger.Info("decision store: a prune round spent its time; the next round goes on", "deleted", deleted)
			return deleted
		}
		if w.Pending() > 0 {
			_ = w.drain(ctx) // a failure waits for Run's retry
		}
	}
}
