package store

import "github.com/jackc/pgx/v5"

// Option configures OpenSQLite and OpenPostgres.
type Option func(*options)

type options struct {
	// synchronous is the SQLite writer's setting; "" for PostgreSQL.
	synchronous string
	// The transcript cache's bounds; no cache when cacheEntries is 0.
	cacheEntries, cacheBytes int
	// tracer traces PostgreSQL's statements; nil for none.
	tracer pgx.QueryTracer
	// independent opens a SQLite file as a store of its own, beside the
	// one the process has open on it (see withIndependentFile).
	independent bool
}

// newOptions applies opts to the defaults, synchronous being the driver's.
func newOptions(synchronous string, opts []Option) options {
	o := options{synchronous: synchronous, cacheEntries: defaultCacheEntries, cacheBytes: defaultCacheBytes}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// newCache returns the transcript cache o asks for, nil when disabled.
func (o options) newCache() *transcriptCache {
	if o.cacheEntries <= 0 {
		return nil
	}
	return newTranscriptCache(o.cacheEntries, o.cacheBytes)
}

// WithSynchronous sets the SQLite writer's synchronous setting,
// SynchronousFull or SynchronousNormal; OpenSQLite rejects any other value
// and OpenPostgres any value (PostgreSQL's durability is the server's
// synchronous_commit).
func WithSynchronous(mode string) Option {
	return func(o *options) { o.synchronous = mode }
}

// withTranscriptCache sets the transcript cache's bounds, in entries and in
// bytes of stored JSON; 0 entries disables it. For tests and benchmarks.
func withTranscriptCache(entries, bytes int) Option {
	return func(o *options) { o.cacheEntries, o.cacheBytes = entries, bytes }
}

// WithTracer traces every statement the PostgreSQL store sends (BEGIN and
// COMMIT included) with t, pgx's tracer interface; OpenSQLite ignores it.
// The gateway's tests count a turn's statements with it.
func WithTracer(t pgx.QueryTracer) Option {
	return func(o *options) { o.tracer = t }
}

// withIndependentFile opens a SQLite store on a file that is not shared
// with the other stores the process opens on it, and takes no process lock:
// a second writer on the file, as another process would be. For the tests'
// uncached reference reads; OpenPostgres ignores it.
func withIndependentFile() Option {
	return func(o *options) { o.independent = true }
}
