package gateway

import (
	"context"
	"errors"
	"sync"
)

// errQueueFull is returned when a session already has its turn running and
// MaxQueuedTurnsPerSession requests waiting; it maps to 429.
var errQueueFull = errors.New("session turn queue is full")

// sessionLocks is the per-session turn lock: one turn per session at a
// time, later requests queue in arrival order behind it, up to maxQueue()
// waiters (the live limits.maxQueuedTurnsPerSession, read at each request).
type sessionLocks struct {
	maxQueue func() int
	mu       sync.Mutex
	locks    map[string]*sessionLock
}

type sessionLock struct {
	// sem holds one token while a turn runs.
	sem chan struct{}
	// users counts the holder and the waiters; the entry is deleted at 0.
	users int
}

func newSessionLocks(maxQueue func() int) *sessionLocks {
	return &sessionLocks{maxQueue: maxQueue, locks: map[string]*sessionLock{}}
}

// acquire takes key's lock, waiting for it while ctx allows. When bounded
// and the lock already has a holder and maxQueue() waiters, it fails at once
// with errQueueFull. Submission workers acquire unbounded: their queue is
// the durable submission table. The returned release must be called once.
func (s *sessionLocks) acquire(ctx context.Context, key string, bounded bool) (release func(), err error) {
	s.mu.Lock()
	l := s.locks[key]
	if l == nil {
		l = &sessionLock{sem: make(chan struct{}, 1)}
		s.locks[key] = l
	}
	if bounded && l.users > s.maxQueue() {
		s.mu.Unlock()
		return nil, errQueueFull
	}
	l.users++
	s.mu.Unlock()

	select {
	case l.sem <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-l.sem; s.leave(key, l) }) }, nil
	case <-ctx.Done():
		s.leave(key, l)
		return nil, ctx.Err()
	}
}

// tryAcquire takes key's lock if it is free and nobody waits for it, and
// reports whether it did; release must then be called once.
func (s *sessionLocks) tryAcquire(key string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locks[key] != nil {
		return nil, false
	}
	l := &sessionLock{sem: make(chan struct{}, 1), users: 1}
	l.sem <- struct{}{}
	s.locks[key] = l
	var once sync.Once
	return func() { once.Do(func() { <-l.sem; s.leave(key, l) }) }, true
}

func (s *sessionLocks) leave(key string, l *sessionLock) {
	s.mu.Lock()
	l.users--
	if l.users == 0 {
		delete(s.locks, key)
	}
	s.mu.Unlock()
}

// busy reports whether key's lock is held (for tests and status).
func (s *sessionLocks) busy(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.locks[key]
	return l != nil && len(l.sem) > 0
}
