// Package storefault injects failures into a real store for tests: it
// fails chosen calls of chosen methods at the store's boundary, and passes
// every other call to the store underneath.
package storefault

import (
	"context"
	"errors"
	"sync"

	"github.com/turngate/turngate/gateway/store"
)

// Faults chooses the calls of a wrapped store that fail.
type Faults struct {
	f *faults
}

type faults struct {
	mu    sync.Mutex
	calls map[string]int
	plans map[string]*plan
}

// plan fails the calls of one method from its first to its last (counted
// as calls[op] counts them).
type plan struct {
	first, last int
	err         func(op string) error
}

// Wrap returns st with the faults to inject into it (none until Fail). The
// store implements store.Relay when st does.
func Wrap(st store.Store) (store.Store, *Faults) {
	f := &faults{calls: map[string]int{}, plans: map[string]*plan{}}
	return store.Wrap(st, f.run), &Faults{f: f}
}

// Fail makes the nth call of op from now on (n = 1: the next one) and the
// times-1 calls after it fail with err(op), without reaching the store;
// times < 0 fails every call from the nth on. It replaces an earlier Fail
// of op, and Calls(op) counts from 0 again.
func (s *Faults) Fail(op string, n, times int, err func(op string) error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.calls[op] = 0
	first := n
	last := first + times - 1
	if times < 0 {
		last = int(^uint(0) >> 1)
	}
	s.f.plans[op] = &plan{first: first, last: last, err: err}
}

// Heal ends every Fail.
func (s *Faults) Heal() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	clear(s.f.plans)
}

// Calls returns how many calls of op were made (failed ones included)
// since the last Fail of op.
func (s *Faults) Calls(op string) int {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.f.calls[op]
}

func (f *faults) run(ctx context.Context, op string, call func(context.Context) error) error {
	f.mu.Lock()
	f.calls[op]++
	n := f.calls[op]
	p := f.plans[op]
	f.mu.Unlock()
	if p != nil && n >= p.first && n <= p.last {
		return p.err(op)
	}
	return call(ctx)
}

// errInjected is the driver error of the injected failures.
var errInjected = errors.New("storefault: injected failure")

// Refused is the failure of a call the database never received, as when
// it refuses connections: nothing is stored, and the call is safe to make
// again (store.Retryable).
func Refused(op string) error {
	return &store.UnavailableError{Op: op, NotSent: true, Err: errInjected}
}

// Lost is the failure of a call whose connection broke before its answer
// came: the store is unavailable and the outcome of a write is unknown
// (this one stored nothing).
func Lost(op string) error {
	return &store.UnavailableError{Op: op, Err: errInjected}
}

// Broken is a failure of another kind than unavailability (a bug, a
// corrupt row): the store answered with an error.
func Broken(string) error { return errInjected }
