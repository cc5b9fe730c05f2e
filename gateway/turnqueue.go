package gateway

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/turngate/turngate/gateway/store"
)

// leasePoll is how often a request waiting for a session's lease tries it
// when no notification woke it: a fallback for a missed notification, a
// holder that died (its lease expires) or a waiter ahead whose replica
// died (its place expires).
const leasePoll = 500 * time.Millisecond

// turnQueue is this replica's requests waiting in the sessions' queues in
// the database (store.Relay.Enqueue), by session key in the queue's order:
// when a session's lease is released, only the first of them can be next
// on this replica, so it alone is woken.
type turnQueue struct {
	mu      sync.Mutex
	waiting map[string][]*turnWaiter
}

// turnWaiter is one waiting request.
type turnWaiter struct {
	w *store.Waiter
	// wake holds a wake-up until the request next looks at it.
	wake chan struct{}
}

func newTurnQueue() *turnQueue { return &turnQueue{waiting: map[string][]*turnWaiter{}} }

// add puts q, whose place is q.w, among key's waiting requests.
func (tq *turnQueue) add(key string, q *turnWaiter) {
	tq.mu.Lock()
	defer tq.mu.Unlock()
	list := tq.waiting[key]
	i, _ := slices.BinarySearchFunc(list, q.w.ID, func(e *turnWaiter, id int64) int { return cmp.Compare(e.w.ID, id) })
	tq.waiting[key] = slices.Insert(list, i, q)
}

// remove takes q out of key's waiting requests, if it is there.
func (tq *turnQueue) remove(key string, q *turnWaiter) {
	tq.mu.Lock()
	defer tq.mu.Unlock()
	list := tq.waiting[key]
	i := slices.Index(list, q)
	if i < 0 {
		return
	}
	if len(list) == 1 {
		delete(tq.waiting, key)
		return
	}
	tq.waiting[key] = slices.Delete(list, i, i+1)
}

// wake wakes the first request waiting for key's lease on this replica.
func (tq *turnQueue) wake(key string) {
	tq.mu.Lock()
	defer tq.mu.Unlock()
	if list := tq.waiting[key]; len(list) > 0 {
		select {
		case list[0].wake <- struct{}{}:
		default:
		}
	}
}

// ids returns the places of the requests waiting on this replica.
func (tq *turnQueue) ids() []int64 {
	tq.mu.Lock()
	defer tq.mu.Unlock()
	var ids []int64
	for _, list := range tq.waiting {
		for _, q := range list {
			ids = append(ids, q.w.ID)
		}
	}
	return ids
}

// queue waits for the lease of the tenant's session in the session's queue
// in the database, which a request joins when it finds the lease held: the
// lease goes to its waiters in the order they joined, whatever their
// replica. A bounded request (bounded, as sessionLocks' acquire) counts
// against limits.maxQueuedTurnsPerSession across replicas: errQueueFull
// when that many wait already. The request is woken by the notification of
// the lease's release (and tries every leasePoll meanwhile) until ctx ends;
// then it leaves the queue at once.
func (r *replicas) queue(ctx context.Context, tenant, sessionID, key string, bounded bool) (*store.Lease, error) {
	ttl := r.s.conf().Replica.LeaseTTL
	q := &turnWaiter{wake: make(chan struct{}, 1)}
	enqueue := func() error {
		// Not cut short when ctx ends (a place registered but not known
		// to be would hold up the queue until it expired): the loop below
		// leaves at once then.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
		defer cancel()
		w, err := r.relay.Enqueue(sctx, tenant, sessionID, r.s.conf().Replica.ID, bounded, r.s.conf().Limits.MaxQueuedTurnsPerSession, ttl)
		if errors.Is(err, store.ErrTurnQueueFull) {
			return errQueueFull
		}
		if err != nil {
			return err
		}
		q.w = w
		r.waiters.add(key, q)
		return nil
	}
	if err := enqueue(); err != nil {
		return nil, err
	}
	defer r.waiters.remove(key, q)
	for {
		l, err := r.acquireQueued(ctx, q.w)
		switch {
		case err == nil:
			return l, nil
		case errors.Is(err, store.ErrNotQueued):
			// This replica could not renew the place in time (it paused):
			// the others went on without it; it joins again, at the end.
			r.waiters.remove(key, q)
			if err := enqueue(); err != nil {
				return nil, err
			}
			continue
		case !errors.Is(err, store.ErrLeaseHeld):
			r.leave(q.w)
			return nil, err
		}
		select {
		case <-ctx.Done():
			r.leave(q.w)
			return nil, ctx.Err()
		case <-q.wake:
		case <-time.After(leasePoll):
		}
	}
}

// acquireQueued tries the lease for w. The statement is not cut short when
// ctx ends (its outcome would be unknown: a lease taken but not known to
// be, which nobody would release); a lease it took for a request that has
// ended meanwhile is released at once, waking the next waiter.
func (r *replicas) acquireQueued(ctx context.Context, w *store.Waiter) (*store.Lease, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
	defer cancel()
	l, err := r.relay.AcquireQueued(sctx, w, r.s.conf().Replica.LeaseTTL)
	if err != nil || ctx.Err() == nil {
		return l, err
	}
	if err := r.s.store.ReleaseLease(sctx, l); err != nil {
		r.s.log.Error("releasing session lease", "session", l.SessionID, "err", err)
	}
	return nil, ctx.Err()
}

// leave takes w, the place of a request that gives up, out of its
// session's queue.
func (r *replicas) leave(w *store.Waiter) {
	ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
	defer cancel()
	if err := r.relay.Dequeue(ctx, w); err != nil {
		r.s.log.Error("leaving the session's queue", "session", w.SessionID, "err", err)
	}
}

// renewWaiters renews the places of this replica's waiting requests, in one
// statement, while there are some. Only theirs: a place this replica
// registered but no request of its waits in (its registration's answer was
// lost, or its removal failed) expires.
func (r *replicas) renewWaiters(ctx context.Context) {
	ids := r.waiters.ids()
	if r.pauseHeartbeats.Load() || len(ids) == 0 {
		return
	}
	if err := r.relay.RenewWaiters(ctx, ids, r.s.conf().Replica.LeaseTTL); err != nil && ctx.Err() == nil {
		r.s.log.Error("renewing the places of waiting requests", "err", err)
	}
}
