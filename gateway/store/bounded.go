package store

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// DefaultTimeout is the deadline Bounded gives a store call when none is
// configured (store.timeout).
const DefaultTimeout = 5 * time.Second

// Watch is told how the store calls of Bounded go.
type Watch struct {
	// Unavailable, when set, is called for every call that failed because
	// the store is unavailable.
	Unavailable func(err *UnavailableError)
	// Changed, when set, is called when the store becomes unavailable (up
	// false, err the first failure) and when a call succeeds again after
	// that (up true, err nil).
	Changed func(up bool, err *UnavailableError)
}

// Bounded returns st with a deadline of timeout on every call (but
// Relay.Listen, which lasts as long as its ctx): a call that has not
// answered by then fails with an *UnavailableError, as does one that
// failed because the database could not be reached or serve (a refused
// connection, a broken one, PostgreSQL shutting down, SQLite's lock). The
// store's own refusals (ErrNotFound, ErrFenced, …) and the caller's
// cancellation pass unchanged. The result implements Relay when st does.
//
// A write cut off by the deadline may still have been stored (its outcome
// is unknown) unless UnavailableError.NotSent says otherwise.
func Bounded(st Store, timeout time.Duration, w Watch) Store {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	g := &guard{timeout: timeout, watch: w}
	return Wrap(st, g.run)
}

// guard applies the deadline and classifies the outcomes of the calls.
type guard struct {
	timeout time.Duration
	watch   Watch
	down    atomic.Bool
}

// run is Bounded's Middleware.
func (g *guard) run(ctx context.Context, op string, call func(context.Context) error) error {
	c, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return g.outcome(ctx, c, op, call(c))
}

// outcome classifies err, the error of op made with c, a child of ctx
// with the store's deadline.
func (g *guard) outcome(ctx, c context.Context, op string, err error) error {
	if err == nil {
		g.up()
		return nil
	}
	if ctx.Err() != nil {
		return err // the caller gave up: it says nothing of the store
	}
	var ue *UnavailableError
	if errors.Is(c.Err(), context.DeadlineExceeded) {
		ue = &UnavailableError{Op: op, Timeout: g.timeout, Err: err}
	} else if e, ok := unavailable(op, err).(*UnavailableError); ok {
		ue = e
	}
	if ue == nil {
		g.up() // the store answered, with a refusal of its own
		return err
	}
	if g.watch.Unavailable != nil {
		g.watch.Unavailable(ue)
	}
	if g.down.CompareAndSwap(false, true) && g.watch.Changed != nil {
		g.watch.Changed(false, ue)
	}
	return ue
}

func (g *guard) up() {
	if g.down.Load() && g.down.CompareAndSwap(true, false) && g.watch.Changed != nil {
		g.watch.Changed(true, nil)
	}
}
