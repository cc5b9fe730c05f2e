package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrLeaseHeld reports that another owner holds the session's turn lease
// and it has not expired: the caller waits and tries again.
var ErrLeaseHeld = errors.New("store: the session's turn lease is held by another owner")

// ErrFenced reports a write refused because the lease or claim it was made
// under is no longer the current one: its lease expired and another owner
// took the session (or the submission), so the write would overwrite the
// new holder's work. Nothing of the write is stored.
var ErrFenced = errors.New("store: fenced out: the lease this write was made under was lost")

// Lease is a session's turn lease: while it is held, and only then, its
// holder runs the session's turn. Token is the fencing token: it grows at
// every acquisition of the session's lease, so a write carrying the lease
// (see WithLease) is refused with ErrFenced once another acquisition has
// happened, even when the first holder does not know yet that it lost it.
type Lease struct {
	Tenant    string
	SessionID string
	// Owner names the holder, a replica id.
	Owner string
	// Token is the fencing token of this acquisition.
	Token int64
	// Expires is when the lease lapses unless renewed.
	Expires time.Time
}

// ErrTurnQueueFull reports that a session already has as many counted
// waiters for its turn lease as Relay.Enqueue's bound allows.
var ErrTurnQueueFull = errors.New("store: the session's turn queue is full")

// ErrNotQueued reports that a waiter's place in its session's queue is gone:
// it expired (its replica did not renew it within its ttl) or was removed.
// The waiter is no longer in line; it may Enqueue again, at the end.
var ErrNotQueued = errors.New("store: the waiter's place in the session's queue is gone")

// Waiter is a request's place in the queue of a session's turn lease (see
// Relay.Enqueue).
type Waiter struct {
	Tenant    string
	SessionID string
	// Owner names the waiting replica: the lease is taken for it.
	Owner string
	// ID orders the session's queue: the lease goes to the live waiter
	// with the smallest.
	ID int64
}

// leaseKey carries a Lease in a context.
type leaseKey struct{}

// WithLease returns ctx carrying l: every write of l's session made with the
// returned context (Admit, AppendMessage, UpsertMessage, TruncateAfter,
// SetLastBody, FinishTurn, JournalToolResult) checks, in its own transaction, that l is still
// the session's current lease, and fails with ErrFenced otherwise, storing
// nothing. Writes of other sessions are unaffected.
func WithLease(ctx context.Context, l *Lease) context.Context {
	return context.WithValue(ctx, leaseKey{}, l)
}

// fenceOf returns the lease ctx carries for the tenant's session, nil when
// it carries none or another session's.
func fenceOf(ctx context.Context, tenant, sessionID string) *Lease {
	l, _ := ctx.Value(leaseKey{}).(*Lease)
	if l == nil || l.Tenant != tenant || l.SessionID != sessionID {
		return nil
	}
	return l
}

// leaseArgs checks the arguments of AcquireLease.
func leaseArgs(tenant, sessionID, owner string, ttl time.Duration) error {
	if err := nonEmpty("tenant", tenant, "session id", sessionID, "owner", owner); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: lease ttl %v is not positive", ErrInvalid, ttl)
	}
	return nil
}

// memLeases is the session leases of a store that serves one process
// (SQLite): they live in memory, with the same semantics as PostgreSQL's
// table. Tokens start at the process's start time in nanoseconds, so they
// also grow across restarts.
type memLeases struct {
	mu     sync.Mutex
	next   int64
	leases map[cacheKey]*memLease
}

type memLease struct {
	Lease
	cancelled bool
}

func newMemLeases() *memLeases {
	return &memLeases{next: now().UnixNano(), leases: map[cacheKey]*memLease{}}
}

// acquire implements Store.AcquireLease.
func (m *memLeases) acquire(tenant, sessionID, owner string, ttl time.Duration) (*Lease, error) {
	if err := leaseArgs(tenant, sessionID, owner, ttl); err != nil {
		return nil, fmt.Errorf("acquiring lease: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := cacheKey{tenant, sessionID}
	t := now()
	if l := m.leases[k]; l != nil && l.Expires.After(t) {
		return nil, ErrLeaseHeld
	}
	m.next++
	l := &memLease{Lease: Lease{Tenant: tenant, SessionID: sessionID, Owner: owner, Token: m.next, Expires: t.Add(ttl)}}
	m.leases[k] = l
	out := l.Lease
	return &out, nil
}

// renew implements Store.RenewLease.
func (m *memLeases) renew(l *Lease, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("renewing lease: %w: ttl %v is not positive", ErrInvalid, ttl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[cacheKey{l.Tenant, l.SessionID}]
	if cur == nil || cur.Token != l.Token {
		return false, fmt.Errorf("renewing lease: %w", ErrFenced)
	}
	cur.Expires = now().Add(ttl)
	l.Expires = cur.Expires
	return cur.cancelled, nil
}

// release implements Store.ReleaseLease.
func (m *memLeases) release(l *Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := cacheKey{l.Tenant, l.SessionID}
	if cur := m.leases[k]; cur != nil && cur.Token == l.Token {
		delete(m.leases, k)
	}
	return nil
}

// cancel implements Store.CancelLease.
func (m *memLeases) cancel(tenant, sessionID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[cacheKey{tenant, sessionID}]
	if cur == nil || !cur.Expires.After(now()) {
		return false
	}
	cur.cancelled = true
	return true
}

// check returns ErrFenced unless l is the session's current lease.
func (m *memLeases) check(l *Lease) error {
	if l == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[cacheKey{l.Tenant, l.SessionID}]
	if cur == nil || cur.Token != l.Token {
		return ErrFenced
	}
	return nil
}
