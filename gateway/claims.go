package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/turngate/turngate/gateway/store"
)

// renew keeps the claim of sub, a submission this replica runs, alive:
// every third of replica.leaseTtl it renews it, so no other replica takes
// it over while it runs. The returned stop ends the renewals and waits for
// them; call it before finishing the submission. A renewal refused with
// ErrFenced (the claim expired while this process was paused, and another
// replica took the submission over) stops renewing; FinishSubmission then
// refuses this replica's outcome.
func (w *submissions) renew(sub *store.Submission) (stop func()) {
	ttl := w.s.conf().Replica.LeaseTTL
	return every(ttl/3, func(ctx context.Context) bool {
		err := w.s.store.RenewSubmission(ctx, sub, ttl)
		switch {
		case errors.Is(err, store.ErrFenced):
			w.s.log.Warn("submission claim lost", "submission", sub.ID, "attempt", sub.Attempts)
			return false
		case err != nil && ctx.Err() == nil:
			w.s.log.Error("renewing submission claim", "submission", sub.ID, "err", err)
		}
		return true
	})
}

// every calls f every interval, on a goroutine of its own, until f returns
// false or the returned stop is called; stop cancels the context f is
// given and waits for f to return. It is the heartbeat of a submission's
// claim, of a session's lease and of the waiters' places, and the
// replicas' sweep.
func every(interval time.Duration, f func(ctx context.Context) bool) (stop func()) {
	return repeat(interval, false, f)
}

// atOnceThenEvery is every whose f is also called at once: a sweep that
// first catches up with what came due while no gateway ran (the approvals'
// expiry).
func atOnceThenEvery(interval time.Duration, f func(ctx context.Context) bool) (stop func()) {
	return repeat(interval, true, f)
}

// repeat is every, calling f at once first when atOnce is set.
func repeat(interval time.Duration, atOnce bool, f func(ctx context.Context) bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		if atOnce && !f(ctx) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !f(ctx) {
				return
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { cancel(); wg.Wait() }) }
}
