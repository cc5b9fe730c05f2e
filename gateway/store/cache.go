package store

import (
	"container/list"
	"encoding/json"
	"sync"
	"time"

	"github.com/turngate/turngate/engine"
)

// The transcript cache's default bounds. A turn reads the transcript its
// session's last turn wrote, so the sessions in use are what must fit: 256
// is 4 times the concurrent sessions we measure under load, and a miss costs
// only the read the cache saves. 16 MiB of stored JSON bounds the memory of
// long transcripts; decoded messages take about three times their JSON
// (4096 entries cost the load program's gateway 160–190 MiB of RSS, 1024
// entries 50 MiB).
const (
	defaultCacheEntries = 256
	defaultCacheBytes   = 16 << 20
)

// cacheKey names a session: (tenant, id).
type cacheKey struct{ tenant, id string }

// cachedMessage is one message of a cached transcript: its stored
// message_id, the message decoded from its stored body (so it equals what a
// read of the database returns), and the length of that body.
type cachedMessage struct {
	id   string
	m    engine.UIMessage
	size int
}

// cacheEntry is one session and its transcript.
//
// Its msgs array is shared with readers that copy it outside the lock
// (see get), so an element below len(msgs) is never written once stored:
// a write appends past the end, or replaces the whole slice.
type cacheEntry struct {
	key   cacheKey
	sess  Session
	msgs  []cachedMessage
	bytes int
}

// transcriptCache is a store's in-process cache of decoded
// transcripts, bounded by entries and by the bytes of their stored JSON,
// evicting the least recently used.
//
// The store changes it after each commit, in the commit order of each
// session's writes (SQLite's writer goroutine, PostgreSQL's lock per
// session), so it holds what the database holds once a write has returned.
// A read that misses fills it only when no commit ran while the read went to
// the database: seq counts the changes and committing counts the commits
// between their start and the moment their changes are applied, so a
// transcript read during that window, which may or may not hold the commit,
// is never stored and then changed a second time.
type transcriptCache struct {
	maxEntries, maxBytes int

	mu         sync.Mutex
	seq        uint64 // bumped by every change a write makes
	committing int    // commits whose changes are not all applied yet
	lru        list.List
	entries    map[cacheKey]*list.Element
	bytes      int
}

func newTranscriptCache(maxEntries, maxBytes int) *transcriptCache {
	return &transcriptCache{maxEntries: maxEntries, maxBytes: maxBytes, seq: 1, entries: map[cacheKey]*list.Element{}}
}

// get returns a copy of k's session and transcript. On a miss it returns a
// fill token for fill, 0 when a read now must not fill the cache.
func (c *transcriptCache) get(k cacheKey) (sess *Session, msgs []engine.UIMessage, token uint64, hit bool) {
	c.mu.Lock()
	el, ok := c.entries[k]
	if !ok {
		if c.committing == 0 {
			token = c.seq
		}
		c.mu.Unlock()
		return nil, nil, token, false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	s, ms := e.sess, e.msgs
	c.mu.Unlock()
	// The elements of ms are never written again (see cacheEntry): copying
	// them without the lock is safe.
	sess, msgs = copyTranscript(s, ms)
	return sess, msgs, 0, true
}

// fill stores k's session and transcript, read from the database after get
// returned token, unless a write has changed the cache since or a commit is
// being applied. The cache takes msgs; sess is copied.
func (c *transcriptCache) fill(k cacheKey, token uint64, sess *Session, msgs []cachedMessage) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if token == 0 || token != c.seq || c.committing > 0 {
		return false
	}
	if _, ok := c.entries[k]; ok {
		// Filled by another read of the same state.
		return false
	}
	c.insert(&cacheEntry{key: k, sess: *sess, msgs: msgs})
	return true
}

// beginCommit marks a commit whose changes are about to be applied: reads
// that miss until endCommit do not fill the cache.
func (c *transcriptCache) beginCommit() {
	c.mu.Lock()
	c.committing++
	c.seq++
	c.mu.Unlock()
}

// endCommit ends beginCommit.
func (c *transcriptCache) endCommit() {
	c.mu.Lock()
	c.committing--
	c.seq++
	c.mu.Unlock()
}

// reset drops every entry.
func (c *transcriptCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	c.lru.Init()
	clear(c.entries)
	c.bytes = 0
}

// invalidate drops k's entry.
func (c *transcriptCache) invalidate(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
}

// admit applies a committed Admit that stored sess and, when not nil,
// appended user. When the Admit created the session, its entry is exactly
// that; otherwise an entry is only updated when present.
func (c *transcriptCache) admit(k cacheKey, sess *Session, created bool, user *cachedMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	s := *sess
	s.LastBody = cloneRaw(sess.LastBody)
	if created {
		if el, ok := c.entries[k]; ok {
			c.remove(el)
		}
		msgs := []cachedMessage{}
		if user != nil {
			msgs = append(msgs, *user)
		}
		c.insert(&cacheEntry{key: k, sess: s, msgs: msgs})
		return
	}
	el, ok := c.entries[k]
	if !ok {
		return
	}
	e := el.Value.(*cacheEntry)
	if !e.follows(s.version) {
		c.remove(el)
		return
	}
	delta := len(s.LastBody) - len(e.sess.LastBody)
	e.sess = s
	if user != nil {
		e.msgs = append(e.msgs, *user)
		delta += user.size
	}
	c.grow(e, delta)
}

// put applies a committed write of m to k's session at updated: with
// replace, the message with m's id is replaced in place when there is one;
// else m is appended.
//
// version is the session's stored version after the write (0 on a store
// without versions): an entry that is not at the version before it misses
// another process's writes and is dropped instead.
func (c *transcriptCache) put(k cacheKey, updated time.Time, version int64, m cachedMessage, replace bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.change(k, version)
	if e == nil {
		return
	}
	e.sess.UpdatedAt = updated
	i := -1
	if replace {
		for j := len(e.msgs) - 1; j >= 0; j-- {
			if e.msgs[j].id == m.id {
				i = j
				break
			}
		}
	}
	delta := m.size
	if i < 0 {
		e.msgs = append(e.msgs, m)
	} else {
		delta -= e.msgs[i].size
		// A new array: readers may be copying the old one.
		msgs := make([]cachedMessage, len(e.msgs))
		copy(msgs, e.msgs)
		msgs[i] = m
		e.msgs = msgs
	}
	c.grow(e, delta)
}

// change counts a change a committed write makes to k's session, which
// left it at version, and returns k's entry, nil when k is not cached or
// its entry does not hold the version before (then it is dropped). c.mu
// must be held.
func (c *transcriptCache) change(k cacheKey, version int64) *cacheEntry {
	c.seq++
	el, ok := c.entries[k]
	if !ok {
		return nil
	}
	e := el.Value.(*cacheEntry)
	if !e.follows(version) {
		c.remove(el)
		return nil
	}
	e.sess.version = version
	return e
}

// follows reports whether a write that left the session at version applies
// to e: always without versions (0, SQLite), else when e holds the version
// just before it. Another replica's write in between makes e miss it.
func (e *cacheEntry) follows(version int64) bool {
	return version == 0 || e.sess.version == version-1
}

// stale drops k's entry if it holds version, which is no longer the stored
// one, and returns a fill token for the read that replaces it (0 when it
// must not fill; see get).
func (c *transcriptCache) stale(k cacheKey, version int64) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[k]; ok && el.Value.(*cacheEntry).sess.version == version {
		c.remove(el)
	}
	if c.committing > 0 {
		return 0
	}
	return c.seq
}

// setLastBody applies a committed SetLastBody; the cache takes body.
func (c *transcriptCache) setLastBody(k cacheKey, body json.RawMessage, updated time.Time, version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.change(k, version)
	if e == nil {
		return
	}
	delta := len(body) - len(e.sess.LastBody)
	e.sess.LastBody, e.sess.UpdatedAt = body, updated
	c.grow(e, delta)
}

// insert adds e as the most recent entry, then evicts down to the bounds.
// c.mu is held.
func (c *transcriptCache) insert(e *cacheEntry) {
	e.bytes = entryBytes(e)
	c.entries[e.key] = c.lru.PushFront(e)
	c.bytes += e.bytes
	c.evict()
}

// grow counts delta more bytes in e after a change, then evicts down to the
// bounds. c.mu is held.
func (c *transcriptCache) grow(e *cacheEntry, delta int) {
	e.bytes += delta
	c.bytes += delta
	c.evict()
}

// evict drops the least recently used entries until the cache is within its
// bounds. c.mu is held.
func (c *transcriptCache) evict() {
	for c.lru.Len() > 0 && (c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes) {
		c.remove(c.lru.Back())
	}
}

// remove drops el's entry. c.mu is held.
func (c *transcriptCache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.entries, e.key)
	c.bytes -= e.bytes
}

// len returns the number of entries.
func (c *transcriptCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// entryBytes is the approximate size of e: the stored JSON of its last body
// and messages.
func entryBytes(e *cacheEntry) int {
	n := len(e.sess.LastBody)
	for _, m := range e.msgs {
		n += m.size
	}
	return n
}

// decodeMessage returns the message stored with id and body as a read of
// the database returns it.
func decodeMessage(id string, body []byte) (cachedMessage, error) {
	var m engine.UIMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return cachedMessage{}, err
	}
	return cachedMessage{id: id, m: m, size: len(body)}, nil
}

// copyTranscript returns a copy of sess and msgs that shares nothing a
// caller can change with them: a new slice of messages, new Parts slices
// and new bytes for every json.RawMessage (strings are immutable). It takes
// four allocations whatever the length: the session, the messages, all
// their parts and all their raw JSON. Each copied slice is capped at its
// length, so appending to it never writes into its neighbour.
func copyTranscript(sess Session, msgs []cachedMessage) (*Session, []engine.UIMessage) {
	nraw, nparts := len(sess.LastBody), 0
	for i := range msgs {
		m := &msgs[i].m
		nraw += len(m.Metadata)
		nparts += len(m.Parts)
		for j := range m.Parts {
			p := &m.Parts[j]
			nraw += len(p.Input) + len(p.Output) + len(p.Data) + len(p.ProviderMetadata)
		}
	}
	a := arena{buf: make([]byte, 0, nraw)}
	parts := make([]engine.UIPart, 0, nparts)
	out := &Session{}
	*out = sess
	out.LastBody = a.raw(sess.LastBody)
	ms := make([]engine.UIMessage, len(msgs))
	for i := range msgs {
		m := msgs[i].m
		m.Metadata = a.raw(m.Metadata)
		if m.Parts != nil {
			start := len(parts)
			parts = append(parts, m.Parts...)
			m.Parts = parts[start:len(parts):len(parts)]
			for j := range m.Parts {
				p := &m.Parts[j]
				p.Input, p.Output = a.raw(p.Input), a.raw(p.Output)
				p.Data, p.ProviderMetadata = a.raw(p.Data), a.raw(p.ProviderMetadata)
			}
		}
		ms[i] = m
	}
	return out, ms
}

// plainTranscript returns msgs as messages, for a read whose decoded
// messages went to no cache and so belong to the caller.
func plainTranscript(msgs []cachedMessage) []engine.UIMessage {
	out := make([]engine.UIMessage, len(msgs))
	for i := range msgs {
		out[i] = msgs[i].m
	}
	return out
}

// arena hands out copies of raw JSON from one allocation.
type arena struct{ buf []byte }

// raw returns a copy of r in the arena, nil for nil; the copy's capacity is
// its length.
func (a *arena) raw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	if len(r) == 0 {
		return json.RawMessage{}
	}
	start := len(a.buf)
	a.buf = append(a.buf, r...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// cloneRaw returns a copy of r, nil for nil.
func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage{}, r...)
}
