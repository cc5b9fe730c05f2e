// Package fakeclock is the settable clock tests inject where the code
// takes a func() time.Time (kill switch expiry, quota windows, the failed
// authentication window), so that a window passes without waiting for it.
package fakeclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when told. It is safe for concurrent
// use: the code under test reads it while the test advances it.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time; pass c.Now where a func() time.Time is
// wanted.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock d ahead.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
