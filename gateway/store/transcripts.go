package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/turngate/turngate/engine"
)

// transcripts serves a store's Messages and Transcript through the
// transcript cache, and builds the afters that keep the cache right once a
// write has committed. Both stores embed it: what differs between them is
// read, and how they order their commits and afters (see SQLite and
// Postgres).
type transcripts struct {
	// cache holds decoded transcripts; nil when disabled.
	cache *transcriptCache
	// read reads the tenant's session and its messages with one statement,
	// so they are one snapshot; ErrNotFound when there is no such session.
	read func(ctx context.Context, tenant, sessionID string) (*Session, []cachedMessage, error)
	// version, when not nil, reads the session's stored version (see
	// Session.version): a store shared by several processes checks every
	// cache hit with it. nil when this process makes all the writes.
	version func(ctx context.Context, tenant, sessionID string) (int64, error)

	// Test hooks, nil outside tests: testAfterCommit runs right after a
	// commit, before its changes reach the cache; testAfterRead runs after
	// a transcript read that missed the cache went to the database, before
	// it fills the cache.
	testAfterCommit, testAfterRead func()
}

// Messages implements Store.
func (s *transcripts) Messages(ctx context.Context, tenant, sessionID string) ([]engine.UIMessage, error) {
	_, msgs, err := s.transcript(ctx, tenant, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading messages: %w", err)
	}
	return msgs, nil
}

// Transcript implements Store.
func (s *transcripts) Transcript(ctx context.Context, tenant, sessionID string) (*Session, []engine.UIMessage, error) {
	sess, msgs, err := s.transcript(ctx, tenant, sessionID)
	if err != nil {
		return nil, nil, fmt.Errorf("reading transcript: %w", err)
	}
	return sess, msgs, nil
}

// leaseVersion returns the version of the tenant's session that the
// acquisition of the lease ctx carries read (see WithLease), else reads it.
func (s *transcripts) leaseVersion(ctx context.Context, tenant, sessionID string) (int64, error) {
	if l := fenceOf(ctx, tenant, sessionID); l != nil && l.version != 0 {
		return l.version, nil
	}
	return s.version(ctx, tenant, sessionID)
}

// transcript returns the session and its messages from the transcript
// cache, or reads them and fills the cache.
func (s *transcripts) transcript(ctx context.Context, tenant, sessionID string) (*Session, []engine.UIMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	c := s.cache
	if c == nil {
		sess, msgs, err := s.read(ctx, tenant, sessionID)
		if err != nil {
			return nil, nil, err
		}
		return sess, plainTranscript(msgs), nil
	}
	k := cacheKey{tenant, sessionID}
	sess, out, token, hit := c.get(k)
	if hit && s.version != nil {
		// Another process may have written since: serve the entry only
		// while it holds the stored version. Under the session's lease,
		// the one its acquisition read: every write of the gateway to a
		// session is made under its lease, so none can have committed
		// since.
		v, err := s.leaseVersion(ctx, tenant, sessionID)
		if errors.Is(err, ErrNotFound) {
			c.invalidate(k) // erased by another process
		}
		if err != nil {
			return nil, nil, err
		}
		if v != sess.version {
			hit, token = false, c.stale(k, sess.version)
		}
	}
	if hit {
		return sess, out, nil
	}
	sess, msgs, err := s.read(ctx, tenant, sessionID)
	if err != nil {
		return nil, nil, err
	}
	if s.testAfterRead != nil {
		s.testAfterRead()
	}
	if !c.fill(k, token, sess, msgs) {
		return sess, plainTranscript(msgs), nil
	}
	// The cache owns msgs now: the caller gets a copy.
	sess, out = copyTranscript(*sess, msgs)
	return sess, out, nil
}

// transcriptRow adds one row of a transcript read (see read) to *sess and
// *msgs: the session's columns, then the message's stored id and body, nil
// for the one row of a session without messages.
func transcriptRow(sess **Session, msgs *[]cachedMessage, tenant, sessionID, agent string, lastBody []byte,
	created, updated int64, id, body []byte) error {
	if *sess == nil {
		*sess = newSession(tenant, sessionID, agent, lastBody, created, updated)
	}
	if body == nil {
		return nil
	}
	m, err := decodeMessage("", body)
	if err != nil {
		return fmt.Errorf("decoding message: %w", err)
	}
	// The stored id is the decoded one unless it is not UTF-8.
	if m.id = m.m.ID; string(id) != m.id {
		m.id = string(id)
	}
	*msgs = append(*msgs, m)
	return nil
}

// afterSetLastBody returns the after of a write that sets the session's
// last body to body at *t, leaving it at *version (both set by the write);
// nil without a cache.
func (s *transcripts) afterSetLastBody(k cacheKey, body json.RawMessage, t, version *int64) func() {
	c := s.cache
	if c == nil {
		return nil
	}
	var cached json.RawMessage // an empty body is stored as NULL, which reads as nil
	if len(body) > 0 {
		cached = cloneRaw(body)
	}
	return func() { c.setLastBody(k, cached, fromNanos(*t), *version) }
}

// admission is what the last run of an Admit's write did, for its after.
type admission struct {
	sess *Session
	// created: the write created the session; admitted: it stored the
	// admission (the session is not another agent's).
	created, admitted bool
}

// afterAdmit returns the after of an Admit whose write records its outcome
// in a, with the user message encoded as body (none when user is nil); nil
// without a cache.
func (s *transcripts) afterAdmit(k cacheKey, user *engine.UIMessage, body string, a *admission) (func(), error) {
	c := s.cache
	if c == nil {
		return nil, nil
	}
	var cached *cachedMessage
	if user != nil {
		m, err := decodeMessage(user.ID, []byte(body))
		if err != nil {
			return nil, err
		}
		cached = &m
	}
	return func() {
		if a.admitted {
			c.admit(k, a.sess, a.created, cached)
		}
	}, nil
}

// afterPut returns the after of a write that puts the message id, stored as
// body, into the session at *t, leaving it at *version (both set by the
// write; version 0 without versions): it applies the put to
// the transcript cache. It is nil without a cache.
func (s *transcripts) afterPut(k cacheKey, id, body string, t, version *int64, replace bool) (func(), error) {
	c := s.cache
	if c == nil {
		return nil, nil
	}
	m, err := decodeMessage(id, []byte(body))
	if err != nil {
		return nil, fmt.Errorf("decoding message: %w", err)
	}
	return func() { c.put(k, fromNanos(*t), *version, m, replace) }, nil
}

// invalidateIf returns the after of a write that drops the session's cached
// transcript when *cond (set by the write); nil without a cache.
func (s *transcripts) invalidateIf(cond *bool, k cacheKey) func() {
	c := s.cache
	if c == nil {
		return nil
	}
	return func() {
		if *cond {
			c.invalidate(k)
		}
	}
}

// admitted returns the session an Admit stored at t: sess's created time
// (created, in Unix nanoseconds) with the last body given, if any.
func admitted(tenant, sessionID, agent string, lastBody json.RawMessage, created, t int64) *Session {
	sess := newSession(tenant, sessionID, agent, nil, created, t)
	if len(lastBody) > 0 {
		sess.LastBody = append(json.RawMessage(nil), lastBody...)
	}
	return sess
}
