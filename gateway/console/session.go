package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"github.com/turngate/turngate/engine"
)

// session is one signed-in browser: the principal of the key it signed in
// with (never the key), its CSRF token and when it ends.
type session struct {
	principal engine.Principal
	csrf      string
	created   time.Time
	expires   time.Time
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

// create starts a session for p and returns its cookie value. At the bound
// the expired sessions go first, then the oldest one: a new sign-in always
// succeeds, and memory stays bounded.
func (s *sessions) create(p engine.Principal) (string, *session) {
	id := randomToken()
	now := s.now()
	se := &session{principal: p, csrf: randomToken(), created: now, expires: now.Add(s.ttl)}
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
