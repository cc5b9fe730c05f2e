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

// ErrLeaseReleased reports a renewal of a lease that was released: its
// holding is over, and the renewal did not revive it.
var ErrLeaseReleased = errors.New("store: the lease was released")

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

	// version is the session's stored version when the lease was taken,
	// read by the acquisition (PostgreSQL): the transcript read made under
	// the lease checks its cached entry against it instead of reading the
	// version again (see transcripts.transcript). 0 when it read none
	// (SQLite's, or no session yet): sessions start at version 1, so the
	// read then asks the store, as it does for a session not written since
	// migration 0006 gave it version 0.
	version int64
}

// setVersion records v, the session's version its acquisition read (nil:
// no session).
func (l *Lease) setVersion(v *int64) {
	if v != nil {
		l.version = *v
	}
}

// LeaseState is what a renewal of a lease reports.
type LeaseState struct {
	// Cancelled: CancelLease asked the holder to cancel its turn.
	Cancelled bool
	// Followed: a reader on another replica asked for the turn's stream
	// (Relay.FollowStream), so the holder relays it.
	Followed bool
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

// releaseKey carries a finishRelease in a context.
type releaseKey struct{}

// finishRelease is the release of lease that WithRelease asks of a
// FinishTurn, and where it reports whether it released it.
type finishRelease struct {
	lease    *Lease
	released *bool
}

// WithRelease returns ctx carrying l, as WithLease does, and asking the
// FinishTurn made with it to release l in its own transaction, so the
// session's next turn need not wait for another round trip: unless a
// reader on another replica follows l's stream (Relay.FollowStream), whose
// relay must end before the lease is released. FinishTurn sets *released
// when it did. Other writes are only fenced by l.
func WithRelease(ctx context.Context, l *Lease, released *bool) context.Context {
	return context.WithValue(WithLease(ctx, l), releaseKey{}, &finishRelease{lease: l, released: released})
}

// releaseOf returns the release ctx asks of a FinishTurn of the tenant's
// session, nil for none.
func releaseOf(ctx context.Context, tenant, sessionID string) *finishRelease {
	r, _ := ctx.Value(releaseKey{}).(*finishRelease)
	if r == nil || r.lease.Tenant != tenant || r.lease.SessionID != sessionID {
		return nil
	}
	return r
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
func (m *memLeases) renew(l *Lease, ttl time.Duration) (LeaseState, error) {
	if ttl <= 0 {
		return LeaseState{}, fmt.Errorf("renewing lease: %w: ttl %v is not positive", ErrInvalid, ttl)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[cacheKey{l.Tenant, l.SessionID}]
	if cur == nil || cur.Token != l.Token {
		return LeaseState{}, fmt.Errorf("renewing lease: %w", ErrFenced)
	}
	if cur.Expires.IsZero() {
		return LeaseState{}, fmt.Errorf("renewing lease: %w", ErrLeaseReleased)
	}
	cur.Expires = now().Add(ttl)
	l.Expires = cur.Expires
	return LeaseState{Cancelled: cur.cancelled}, nil
}

// release implements Store.ReleaseLease: the holding stays, expired at the
// zero time, so a renewal of it finds it released.
func (m *memLeases) release(l *Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.leases[cacheKey{l.Tenant, l.SessionID}]; cur != nil && cur.Token == l.Token {
		cur.Expires = time.Time{}
	}
	return nil
}

// cancel implements Store.CancelLease.
func (m *memLeases) cancel(tenant, sessionID string, token int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.leases[cacheKey{tenant, sessionID}]
	if cur == nil || !cur.Expires.After(now()) || token != 0 && cur.Token != token {
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
