package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"github.com/turngate/turngate/engine"
)

// session is one signed-in browser: the principal of the key it signed in
// with (never the key), its CSRF token and when it ends (its TTL, capped
// at the credential's expiry). It is never changed once stored: renew
// stores a new one.
type session struct {
	principal engine.Principal
	csrf      string
	created   time.Time
	expires   time.Time
	// recheck authenticates the credential again; generation is the
	// Console's generation it was last authenticated at.
	recheck    func(context.Context) (Credential, error)
	generation uint64
}

// capAt returns t capped at the credential expiry exp (zero: none).
func capAt(t, exp time.Time) time.Time {
	if !exp.IsZero() && exp.Before(t) {
		return exp
	}
	return t
}

// sessions holds the signed-in sessions of this replica, keyed by the
// SHA-256 of their cookie value, so neither a heap dump nor a timing
// difference in the map lookup gives a usable cookie away. It is safe for
// concurrent use.
type sessions struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[[sha256.Size]byte]*session
}

func newSessions(max int, ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{max: max, ttl: ttl, now: now, m: map[[sha256.Size]byte]*session{}}
}

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for cred, authenticated at generation, and
// returns its cookie value. At the bound the expired sessions go first,
// then the oldest one: a new sign-in always succeeds, and memory stays
// bounded.
func (s *sessions) create(cred Credential, generation uint64) (string, *session) {
	id := randomToken()
	now := s.now()
	se := &session{principal: cred.Principal, csrf: randomToken(), created: now,
		expires: capAt(now.Add(s.ttl), cred.Expires), recheck: cred.Recheck, generation: generation}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		s.pruneLocked(now)
	}
	for len(s.m) >= s.max {
		var oldest [sha256.Size]byte
		var at time.Time
		for k, v := range s.m {
			if at.IsZero() || v.created.Before(at) {
				oldest, at = k, v.created
			}
		}
		delete(s.m, oldest)
	}
	s.m[sha256.Sum256([]byte(id))] = se
	return id, se
}

// pruneLocked drops the expired sessions; mu is held.
func (s *sessions) pruneLocked(now time.Time) {
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		}
	}
}

// get returns the live session of cookie value id.
func (s *sessions) get(id string) (*session, bool) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.m[k]
	if !ok {
		return nil, false
	}
	if !s.now().Before(se.expires) {
		delete(s.m, k)
		return nil, false
	}
	return se, true
}

// renew replaces old, the session of cookie value id, with its credential
// rechecked at generation as cred: the principal may have changed and the
// end may come sooner, never later. It returns false when the session
// ended meanwhile.
func (s *sessions) renew(id string, old *session, cred Credential, generation uint64) (*session, bool) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[k] != old {
		se, ok := s.m[k]
		return se, ok
	}
	se := *old
	se.principal, se.expires, se.generation = cred.Principal, capAt(old.expires, cred.Expires), generation
	if cred.Recheck != nil {
		se.recheck = cred.Recheck
	}
	if !s.now().Before(se.expires) {
		delete(s.m, k)
		return nil, false
	}
	s.m[k] = &se
	return &se, true
}

// revoke ends the session of cookie value id.
func (s *sessions) revoke(id string) {
	s.mu.Lock()
	delete(s.m, sha256.Sum256([]byte(id)))
	s.mu.Unlock()
}

// count is the number of sessions held (expired ones not yet pruned
// included).
func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
