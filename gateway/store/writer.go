package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
)

// The states of a writeRequest. A request moves from queued to started when
// writeLoop takes it, or to abandoned when its caller stops waiting first;
// whichever happens first wins, so an abandoned request never runs and a
// started one is always waited for.
const (
	requestQueued int32 = iota
	requestStarted
	requestAbandoned
)

// writeRequest is one call of write, queued for writeLoop.
type writeRequest struct {
	// ctx is the caller's context without its cancellation: f's
	// statements run with it (see write).
	ctx context.Context
	f   func(ctx context.Context, tx *sql.Tx) error
	// after, when not nil, runs on the writer goroutine once the
	// transaction holding f's successful run has committed (see writeThen).
	after func()
	state atomic.Int32
	done  chan error // buffered, so writeLoop never waits for the caller
}

// write runs f in a transaction on the writer connection and returns once
// that transaction has committed, with f's error or the commit's.
//
// The writer goroutine (writeLoop) runs the writes queued at the same time in
// one transaction: each f inside its own savepoint, in the order they
// queued, so f sees the writes of those before it. When f fails or panics,
// only its savepoint is rolled back and only its caller gets the error; the
// others commit. When the commit fails, every write of the batch gets that
// error: none of them is stored.
//
// Cancelling ctx while the write is queued returns ctx's error and f never
// runs; once f has started, write waits for the outcome, so a write is never
// reported failed and stored. f gets ctx without its cancellation (its
// values kept) for its statements: a started write runs to its end, and the
// SQLite driver starts no watcher goroutine per statement, which it does
// for a context that can be cancelled. SQLite rolls back the whole
// transaction when a write statement hits an I/O error (or is interrupted
// through a context f made itself); the writer then runs the batch's other
// writes again in a new transaction. So f may run more than once and must
// set all of its results on every run.
//
// f must not call write, or use the writer's statements outside tx: the
// writer would wait for itself.
//
// A write that changes sessions or messages must use writeThen, to keep the
// transcript cache right.
func (s *SQLite) write(ctx context.Context, f func(ctx context.Context, tx *sql.Tx) error) error {
	return s.writeThen(ctx, f, nil)
}

// writeThen is write that also runs after, when not nil, once f's changes
// have committed: on the writer goroutine, in commit order with the afters
// of the other writes, before any caller of the batch is told the outcome.
// after does not run when f fails, when the transaction is lost (f then runs
// again, and after follows the commit of that run) or when the commit fails.
// after reads what f's last run set; it must be quick (the writer waits for
// it) and must not call write.
func (s *SQLite) writeThen(ctx context.Context, f func(ctx context.Context, tx *sql.Tx) error, after func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-s.closing:
		return errClosed
	default:
	}
	r := &writeRequest{ctx: context.WithoutCancel(ctx), f: f, after: after, done: make(chan error, 1)}
	select {
	case s.writes <- r:
	case <-s.closing:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(requestQueued, requestAbandoned) {
			return ctx.Err()
		}
	case <-s.stopped:
		// The writer has finished every request it started.
		if r.state.CompareAndSwap(requestQueued, requestAbandoned) {
			return errClosed
		}
	}
	return <-r.done
}

// writeLoop is the writer goroutine: until Close, it takes the oldest queued
// write and every other one queued by then, up to maxBatch, and runs them.
func (s *SQLite) writeLoop() {
	defer close(s.stopped)
	batch := make([]*writeRequest, 0, maxBatch)
	for {
		select {
		case <-s.closing:
			return
		case r := <-s.writes:
			batch = append(batch[:0], r)
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		// Requests whose callers have gone are dropped here, before they run.
		live := batch[:0]
		for _, r := range batch {
			if r.state.CompareAndSwap(requestQueued, requestStarted) {
				live = append(live, r)
			}
		}
		for len(live) > 0 {
			live = s.runTx(live)
		}
		clear(batch[:cap(batch)])
	}
}

// runTx runs reqs in one transaction, commits it and reports each outcome.
// When SQLite rolls the transaction back halfway, the request that was
// running gets the error and runTx returns the other requests that have not
// got an outcome, to run again.
func (s *SQLite) runTx(reqs []*writeRequest) []*writeRequest {
	// The transaction belongs to no caller: a caller's cancelled context
	// must not roll back the others' writes.
	ctx := context.Background()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		for _, r := range reqs {
			r.done <- err
		}
		return nil
	}
	if len(reqs) == 1 {
		// A lone write needs no savepoint: the transaction is its own.
		r := reqs[0]
		if err := runRequest(r, tx); err != nil {
			r.done <- errors.Join(err, ignoreDone(tx.Rollback()))
			return nil
		}
		s.commit(tx, reqs)
		return nil
	}
	savepoint := tx.StmtContext(ctx, s.q.savepoint)
	release := tx.StmtContext(ctx, s.q.release)
	rollbackTo := tx.StmtContext(ctx, s.q.rollbackTo)
	// ok holds the requests that succeeded so far; it reuses reqs' array,
	// never overtaking the request being read.
	ok := reqs[:0]
	for i, r := range reqs {
		_, err := savepoint.ExecContext(ctx)
		lost := err != nil // the transaction is gone
		if err == nil {
			if err = runRequest(r, tx); err != nil {
				// The culprit gets f's error: a failing ROLLBACK TO only
				// says that SQLite has rolled back everything already.
				_, rerr := rollbackTo.ExecContext(ctx)
				if rerr == nil {
					_, rerr = release.ExecContext(ctx)
				}
				lost = rerr != nil
			} else if _, err = release.ExecContext(ctx); err != nil {
				err = fmt.Errorf("store: releasing the write's savepoint: %w", err)
				lost = true
			}
		}
		if lost {
			r.done <- err
			_ = tx.Rollback() // fails when SQLite has already rolled back; nothing to undo then.
			return append(append([]*writeRequest(nil), ok...), reqs[i+1:]...)
		}
		if err != nil {
			r.done <- err
			continue
		}
		ok = append(ok, r)
	}
	s.commit(tx, ok)
	return nil
}

// commit commits tx, applies the afters of reqs in order when it succeeded,
// and only then gives its result to reqs: a caller that reads after its
// write has returned finds the write in the transcript cache. The cache is
// reset when the commit fails: whether it stored anything is unknown.
func (s *SQLite) commit(tx *sql.Tx, reqs []*writeRequest) {
	c := s.cache
	bracket := false
	if c != nil {
		for _, r := range reqs {
			if r.after != nil {
				bracket = true
				break
			}
		}
	}
	if bracket {
		c.beginCommit()
	}
	err := tx.Commit()
	if err == nil {
		s.commits.Add(1)
	}
	if s.testAfterCommit != nil {
		s.testAfterCommit()
	}
	if err != nil && c != nil {
		c.reset()
	}
	if bracket {
		if err == nil {
			for _, r := range reqs {
				if r.after != nil {
					runAfter(c, r.after)
				}
			}
		}
		c.endCommit()
	}
	for _, r := range reqs {
		r.done <- err
	}
}

// runAfter runs a committed write's after. A panic, a bug, would leave the
// cache unknown: the cache is reset and the writer goes on.
func runAfter(c *transcriptCache, after func()) {
	defer func() {
		if recover() != nil {
			c.reset()
		}
	}()
	after()
}

// runRequest runs r's f in tx, turning a panic into an error.
func runRequest(r *writeRequest, tx *sql.Tx) (err error) {
	defer func() {
		switch p := recover().(type) {
		case nil:
		case error:
			err = fmt.Errorf("store: write panicked: %w", p)
		default:
			err = fmt.Errorf("store: write panicked: %v", p)
		}
	}()
	return r.f(r.ctx, tx)
}
