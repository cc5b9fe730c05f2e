package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/turngate/turngate/engine"
)

// busyTimeoutMillis is how long a connection waits for another process's
// lock before failing with SQLITE_BUSY: a tool such as the sqlite3 shell,
// since no other gateway process opens the file (lockFile). Writers of this
// process never wait on each other inside SQLite: they share one connection.
const busyTimeoutMillis = 10000

// maxBatch bounds the writes one transaction commits together. 64 is one
// per concurrent turn at the load we measure (64 sessions); the bound keeps
// the first write of a batch from waiting for the statements of an
// unbounded queue before its commit.
const maxBatch = 64

// errClosed is what a write returns once Close has stopped the writer.
var errClosed = errors.New("store: closed")

// SQLite is the Store on a SQLite file (pure Go, modernc.org/sqlite) in WAL
// mode. Reads use a pool of read-only connections and never wait for
// writers.
//
// Writes go through a single connection, owned by one writer goroutine, so
// concurrent writers queue in the process instead of failing with "database
// is locked". The writer commits in groups: it takes the oldest queued write
// together with every other write queued at that moment (up to maxBatch) and
// runs them in one transaction, each inside its own savepoint, so a failing
// write undoes only its own changes. One commit, and with synchronous=FULL
// one WAL sync, then serves the whole batch. The writer never waits to
// collect more: batches form while the previous commit runs, so a lone
// write's latency is that of its own transaction (plus the hand-over to the
// writer goroutine and back).
//
// Transcript and Messages read through an in-process cache of decoded
// transcripts (decoding and reading them was 9% of the gateway's CPU under
// load). The writer goroutine applies each committed write to the cache, in
// commit order, before the write returns; a commit that fails empties it.
// So the cache is right only while this process is the file's one writer,
// which is what SQLite is for: several gateway replicas use PostgreSQL.
//
// One writer per file is kept, not assumed: the stores OpenSQLite opens on
// one file in one process share it (and the cache, and the leases), and a
// second process that opens the file while this one has it fails at once
// (see lockFile).
type SQLite struct {
	*sqliteFile
	closeOnce sync.Once
}

// sqliteFile is the open file that every SQLite of it in the process
// shares: one writer, one cache.
type sqliteFile struct {
	path string // absolute, its key in openFiles
	refs int    // the open SQLite handles, under openFilesMu
	opts options
	lock *os.File // holds the file's process lock (lockFile)

	w *sql.DB // the single writer connection, used only by writeLoop once it runs
	r *sql.DB // read-only connections
	q *statements

	writes  chan *writeRequest // queued writes, to writeLoop
	closing chan struct{}      // closed by Close
	stopped chan struct{}      // closed when writeLoop has returned
	commits atomic.Int64       // transactions writeLoop committed; tests compare it with the writes

	// leases are the session leases: in memory, since the file serves one
	// process.
	leases *memLeases

	// transcripts serves Messages and Transcript through the cache (nil
	// when disabled): SQLite serves one gateway process, so the writes of
	// this process are all the writes and keep it right (see writeThen).
	// Its testAfterCommit runs on the writer right after a commit.
	transcripts
}

var _ Store = (*SQLite)(nil)

// The writer's synchronous settings (SQLite's PRAGMA synchronous).
const (
	// SynchronousFull syncs the WAL on every commit: an acknowledged write
	// survives power loss. It is the default.
	SynchronousFull = "full"
	// SynchronousNormal syncs the WAL only at checkpoints: a process crash
	// loses nothing, but power loss or an OS crash may lose the last
	// commits (never corrupting the file).
	SynchronousNormal = "normal"
)

// OpenSQLite opens (creating it and its parent directories when absent) the
// SQLite database at path and migrates it to the newest schema. A database
// migrated by a newer binary fails with ErrSchemaTooNew.
func OpenSQLite(path string, opts ...Option) (*SQLite, error) {
	if path == "" || path == ":memory:" {
		return nil, fmt.Errorf("opening sqlite store: %w: path %q is not a file", ErrInvalid, path)
	}
	o := newOptions(SynchronousFull, opts)
	o.tracer = nil // PostgreSQL's; and options must compare (openFiles)
	if o.synchronous != SynchronousFull && o.synchronous != SynchronousNormal {
		return nil, fmt.Errorf("opening sqlite store: %w: synchronous %q is not %q or %q",
			ErrInvalid, o.synchronous, SynchronousFull, SynchronousNormal)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("opening sqlite store: %w", err)
	}
	if o.independent {
		f, err := openSQLiteFile(abs, o)
		if err != nil {
			return nil, err
		}
		return &SQLite{sqliteFile: f}, nil
	}
	openFilesMu.Lock()
	e := openFiles[abs]
	if e == nil {
		// The first open of the file: others of it wait for e.opened.
		e = &openFile{opened: make(chan struct{})}
		openFiles[abs] = e
		openFilesMu.Unlock()
		e.file, e.err = openSQLiteFile(abs, o)
		if e.err != nil {
			openFilesMu.Lock()
			delete(openFiles, abs)
			openFilesMu.Unlock()
		}
		close(e.opened)
		if e.err != nil {
			return nil, e.err
		}
		return &SQLite{sqliteFile: e.file}, nil
	}
	openFilesMu.Unlock()
	<-e.opened
	if e.err != nil {
		return nil, e.err
	}
	openFilesMu.Lock()
	if openFiles[abs] != e {
		openFilesMu.Unlock()
		return OpenSQLite(path, opts...) // closed meanwhile: open it anew
	}
	defer openFilesMu.Unlock()
	f := e.file
	if f.opts != o {
		return nil, fmt.Errorf("opening sqlite store: %w: %s is open in this process with other options", ErrInvalid, abs)
	}
	f.refs++
	return &SQLite{sqliteFile: f}, nil
}

// openFiles are the SQLite files open in this process, by absolute path,
// under openFilesMu.
var (
	openFilesMu sync.Mutex
	openFiles   = map[string]*openFile{}
)

// openFile is an entry of openFiles: file once opened is closed, or err.
type openFile struct {
	opened chan struct{}
	file   *sqliteFile
	err    error
}

// openSQLiteFile opens the file abs, which no SQLite of this process has
// open, and starts its writer.
func openSQLiteFile(abs string, o options) (*sqliteFile, error) {
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("opening sqlite store: creating directory: %w", err)
	}
	var lock *os.File
	if !o.independent {
		var err error
		if lock, err = lockFile(abs); err != nil {
			return nil, fmt.Errorf("opening sqlite store: %w", err)
		}
	}
	ms, err := loadMigrations(migrations, "migrations/sqlite")
	if err != nil {
		_ = closeLock(lock)
		return nil, fmt.Errorf("opening sqlite store: %w", err)
	}

	// The file: URI form lets any path through: '?', '#' and '%' in it are
	// escaped and SQLite decodes them.
	uri := "file:" + (&url.URL{Path: filepath.ToSlash(abs)}).EscapedPath()
	// secure_delete overwrites deleted content with zeros, so an erased
	// session's rows do not linger in the file's free pages.
	common := fmt.Sprintf("_busy_timeout=%d&_foreign_keys=1&_pragma=secure_delete(1)", busyTimeoutMillis)
	// _txlock=immediate takes the write lock at BEGIN, so a transaction that
	// reads before it writes cannot fail halfway on a lock upgrade.
	w, err := sql.Open("sqlite", uri+"?"+common+"&_journal_mode=WAL&_synchronous="+o.synchronous+"&_txlock=immediate")
	if err != nil {
		_ = closeLock(lock)
		return nil, fmt.Errorf("opening sqlite store: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(context.Background(), w, ms); err != nil {
		return nil, errors.Join(fmt.Errorf("opening sqlite store %s: %w", abs, err), w.Close(), closeLock(lock))
	}
	// The readers open after the writer has switched the file to WAL.
	r, err := sql.Open("sqlite", uri+"?"+common+"&_query_only=1")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("opening sqlite store: %w", err), w.Close(), closeLock(lock))
	}
	r.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
	q, err := prepareStatements(context.Background(), w, r)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("opening sqlite store: %w", err), r.Close(), w.Close(), closeLock(lock))
	}
	f := &sqliteFile{
		path:    abs,
		refs:    1,
		opts:    o,
		lock:    lock,
		w:       w,
		r:       r,
		q:       q,
		writes:  make(chan *writeRequest, maxBatch),
		closing: make(chan struct{}),
		stopped: make(chan struct{}),
		leases:  newMemLeases(),
	}
	s := &SQLite{sqliteFile: f}
	f.read = s.readTranscript
	f.cache = o.newCache()
	go s.writeLoop()
	return f, nil
}

// lockFile takes the process lock of the SQLite file abs, an exclusive
// flock of abs+".lock", held until the returned file is closed (or the
// process ends). SQLite serves one process: a second gateway process on the
// file would requeue the first one's running submissions at its start, and
// its writer would contend with the first one's for SQLite's lock, which
// SQLite's busy handler waits for by polling, so a writer that commits
// back to back can starve the other past busy_timeout (SQLITE_BUSY).
func lockFile(abs string) (*os.File, error) {
	f, err := os.OpenFile(abs+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another process: a SQLite file serves one gateway process (several replicas share PostgreSQL)", abs)
		}
		return nil, fmt.Errorf("locking %s: %w", abs, err)
	}
	return f, nil
}

// closeLock releases the process lock of lockFile (none: nil).
func closeLock(lock *os.File) error {
	if lock == nil {
		return nil
	}
	return lock.Close()
}

// Close closes this handle of the database; closing its last handle in the
// process closes the file. The batch being written then completes; writes
// still queued, and writes after Close, fail with errClosed.
func (s *SQLite) Close() error {
	var err error
	s.closeOnce.Do(func() { err = s.release() })
	return err
}

// release drops a handle of f, and closes f when it was the last, holding
// openFilesMu until its lock is released: an open of the file after that
// opens it anew.
func (f *sqliteFile) release() error {
	if !f.opts.independent {
		openFilesMu.Lock()
		defer openFilesMu.Unlock()
		if f.refs--; f.refs > 0 {
			return nil
		}
		delete(openFiles, f.path)
	}
	close(f.closing)
	<-f.stopped
	return errors.Join(f.q.close(), f.r.Close(), f.w.Close(), closeLock(f.lock))
}

// GetOrCreateSession implements Store.
func (s *SQLite) GetOrCreateSession(ctx context.Context, tenant, agent, id string) (*Session, bool, error) {
	if err := nonEmpty("tenant", tenant, "session id", id, "agent", agent); err != nil {
		return nil, false, fmt.Errorf("creating session: %w", err)
	}
	// Most calls find the session; only a miss takes the writer.
	sess, err := s.GetSession(ctx, tenant, id)
	if !errors.Is(err, ErrNotFound) {
		return sess, false, err
	}
	var created bool
	err = s.writeThen(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		_, created, err = s.ensureSession(ctx, tx, tenant, agent, id, now())
		if err != nil {
			return err
		}
		sess, err = getSession(ctx, tx.StmtContext(ctx, s.q.session), tenant, id)
		return err
	}, s.invalidateIf(&created, cacheKey{tenant, id}))
	if err != nil {
		return nil, false, fmt.Errorf("creating session: %w", err)
	}
	return sess, created, nil
}

// GetSession implements Store.
func (s *SQLite) GetSession(ctx context.Context, tenant, id string) (*Session, error) {
	sess, err := getSession(ctx, s.q.readSession, tenant, id)
	if err != nil {
		return nil, fmt.Errorf("reading session: %w", err)
	}
	return sess, nil
}

// SetLastBody implements Store.
func (s *SQLite) SetLastBody(ctx context.Context, tenant, id string, body json.RawMessage) error {
	v, err := jsonArg("last body", body)
	if err != nil {
		return fmt.Errorf("setting last body: %w", err)
	}
	var t, version int64 // version stays 0: SQLite keeps none
	after := s.afterSetLastBody(cacheKey{tenant, id}, body, &t, &version)
	err = s.writeThen(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.leases.check(fenceOf(ctx, tenant, id)); err != nil {
			return err
		}
		t = nanos(now())
		res, err := tx.StmtContext(ctx, s.q.setLastBody).ExecContext(ctx, v, t, tenant, id)
		if err != nil {
			return err
		}
		return affectedOne(res)
	}, after)
	if err != nil {
		return fmt.Errorf("setting last body: %w", err)
	}
	return nil
}

// Admit implements Store. One commit instead of up to three (session,
// last body, user message) shortens the queue on the single writer and
// saves disk syncs at the start of a turn.
func (s *SQLite) Admit(ctx context.Context, tenant, agent, sessionID string, lastBody json.RawMessage, user *engine.UIMessage) (*Session, error) {
	v, body, err := admitArgs(tenant, agent, sessionID, lastBody, user)
	if err != nil {
		return nil, fmt.Errorf("admitting turn: %w", err)
	}
	var a admission // what f's last run did
	after, err := s.afterAdmit(cacheKey{tenant, sessionID}, user, body, &a)
	if err != nil {
		return nil, fmt.Errorf("admitting turn: %w", err)
	}
	err = s.writeThen(ctx, func(ctx context.Context, tx *sql.Tx) error {
		a = admission{}
		if err := s.leases.check(fenceOf(ctx, tenant, sessionID)); err != nil {
			return err
		}
		t := nanos(now())
		// An existing session of agent, the common case: one statement
		// sets its last body, touches it and returns it.
		var pk, createdAt int64
		err := tx.StmtContext(ctx, s.q.admitSession).QueryRowContext(ctx, v, t, tenant, sessionID, agent).Scan(&pk, &createdAt)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// Absent (create it) or another agent's (write nothing).
			if pk, a.created, err = s.ensureSession(ctx, tx, tenant, agent, sessionID, fromNanos(t)); err != nil {
				return err
			}
			if a.sess, err = getSession(ctx, tx.StmtContext(ctx, s.q.session), tenant, sessionID); err != nil || a.sess.Agent != agent {
				return err
			}
			if _, err := tx.StmtContext(ctx, s.q.setLastBody).ExecContext(ctx, v, t, tenant, sessionID); err != nil {
				return err
			}
			createdAt = nanos(a.sess.CreatedAt)
		case err != nil:
			return err
		}
		a.sess, a.admitted = admitted(tenant, sessionID, agent, lastBody, createdAt, t), true
		if user == nil {
			return nil
		}
		return s.putMessageAt(ctx, tx, pk, *user, body, t, false)
	}, after)
	if err != nil {
		return nil, fmt.Errorf("admitting turn: %w", err)
	}
	return a.sess, nil
}

// readTranscript reads the session and its messages with one statement, so
// they are one snapshot: no session gives no rows, an empty transcript one
// row without a message.
//
// A read that has started runs to its end, like a write: with the caller's
// cancellation the SQLite driver would start a watcher goroutine for it, on
// every turn, to interrupt a query that takes about 0.1 ms.
func (s *SQLite) readTranscript(ctx context.Context, tenant, sessionID string) (*Session, []cachedMessage, error) {
	rows, err := s.q.transcript.QueryContext(context.WithoutCancel(ctx), tenant, sessionID)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var sess *Session
	msgs := []cachedMessage{}
	for rows.Next() {
		var (
			agent            string
			lastBody, body   []byte
			id               sql.RawBytes
			created, updated int64
		)
		if err := rows.Scan(&agent, &lastBody, &created, &updated, &id, &body); err != nil {
			return nil, nil, err
		}
		if err := transcriptRow(&sess, &msgs, tenant, sessionID, agent, lastBody, created, updated, id, body); err != nil {
			return nil, nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if sess == nil {
		return nil, nil, ErrNotFound
	}
	return sess, msgs, nil
}

// AppendMessage implements Store.
func (s *SQLite) AppendMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage) error {
	if err := s.putMessage(ctx, tenant, sessionID, m, false); err != nil {
		return fmt.Errorf("appending message: %w", err)
	}
	return nil
}

// UpsertMessage implements Store.
func (s *SQLite) UpsertMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage) error {
	if err := s.putMessage(ctx, tenant, sessionID, m, true); err != nil {
		return fmt.Errorf("upserting message: %w", err)
	}
	return nil
}

// FinishTurn implements Store. One commit instead of two halves the waits
// for the single writer and the disk syncs at the end of a turn.
func (s *SQLite) FinishTurn(ctx context.Context, tenant, sessionID string, m engine.UIMessage, rec *TurnRecord) error {
	args, err := finishTurnArgs(tenant, sessionID, rec)
	if err != nil {
		return fmt.Errorf("finishing turn: %w", err)
	}
	body, err := encodeMessage(m)
	if err != nil {
		return fmt.Errorf("finishing turn: %w", err)
	}
	var t, version int64
	after, err := s.afterPut(cacheKey{tenant, sessionID}, m.ID, body, &t, &version, true)
	if err != nil {
		return fmt.Errorf("finishing turn: %w", err)
	}
	err = s.writeThen(ctx, func(ctx context.Context, tx *sql.Tx) error {
		t = nanos(now())
		if err := s.putMessageTx(ctx, tx, tenant, sessionID, m, body, t, true); err != nil {
			return err
		}
		_, err := tx.StmtContext(ctx, s.q.recordTurn).ExecContext(ctx, args...)
		return err
	}, after)
	if err != nil {
		return fmt.Errorf("finishing turn: %w", err)
	}
	// Nobody follows a stream on another process: the lease goes.
	if r := releaseOf(ctx, tenant, sessionID); r != nil {
		*r.released = s.leases.release(r.lease) == nil
	}
	return nil
}

// encodeMessage checks m's id and role and returns its stored form.
func encodeMessage(m engine.UIMessage) (string, error) {
	if err := nonEmpty("message id", m.ID, "message role", m.Role); err != nil {
		return "", err
	}
	body, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encoding message: %w", err)
	}
	return string(body), nil
}

// putMessage appends m to the session, or with replace first tries to
// replace the message with m.ID in place.
func (s *SQLite) putMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage, replace bool) error {
	body, err := encodeMessage(m)
	if err != nil {
		return err
	}
	var t, version int64
	after, err := s.afterPut(cacheKey{tenant, sessionID}, m.ID, body, &t, &version, replace)
	if err != nil {
		return err
	}
	return s.writeThen(ctx, func(ctx context.Context, tx *sql.Tx) error {
		t = nanos(now())
		return s.putMessageTx(ctx, tx, tenant, sessionID, m, body, t, replace)
	}, after)
}

// putMessageTx is putMessage inside tx at time t, with m already encoded
// as body.
func (s *SQLite) putMessageTx(ctx context.Context, tx *sql.Tx, tenant, sessionID string, m engine.UIMessage, body string, t int64, replace bool) error {
	if err := s.leases.check(fenceOf(ctx, tenant, sessionID)); err != nil {
		return err
	}
	pk, err := s.touchSession(ctx, tx, tenant, sessionID, t)
	if err != nil {
		return err
	}
	return s.putMessageAt(ctx, tx, pk, m, body, t, replace)
}

// putMessageAt appends m, encoded as body, to the session with key pk at
// time t; with replace, a message with m.ID already there is replaced in
// place instead (one upsert statement).
func (s *SQLite) putMessageAt(ctx context.Context, tx *sql.Tx, pk int64, m engine.UIMessage, body string, t int64, replace bool) error {
	q := s.q.appendMessage
	if replace {
		q = s.q.upsertMessage
	}
	_, err := tx.StmtContext(ctx, q).ExecContext(ctx, pk, m.ID, m.Role, body, t, t, pk)
	if isConstraint(err) {
		return fmt.Errorf("%w: message %q is already in the session", ErrConflict, m.ID)
	}
	return err
}

// TruncateAfter implements Store.
func (s *SQLite) TruncateAfter(ctx context.Context, tenant, sessionID, messageID string, inclusive bool) error {
	truncated := true
	err := s.writeThen(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.leases.check(fenceOf(ctx, tenant, sessionID)); err != nil {
			return err
		}
		pk, err := s.touchSession(ctx, tx, tenant, sessionID, nanos(now()))
		if err != nil {
			return err
		}
		var pos int64
		err = tx.StmtContext(ctx, s.q.messagePosition).QueryRowContext(ctx, pk, messageID).Scan(&pos)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("message %q: %w", messageID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if !inclusive {
			pos++
		}
		_, err = tx.StmtContext(ctx, s.q.truncate).ExecContext(ctx, pk, pos)
		return err
	}, s.invalidateIf(&truncated, cacheKey{tenant, sessionID}))
	if err != nil {
		return fmt.Errorf("truncating messages: %w", err)
	}
	return nil
}

// submissionColumns are the columns scanSubmission reads, in order.
const submissionColumns = `id, tenant, session_id, agent, COALESCE(idempotency_key, ''), request, status, result,
	attempts, created_at, updated_at`

// CreateSubmission implements Store.
func (s *SQLite) CreateSubmission(ctx context.Context, in *Submission, limits QueueLimits) (*Submission, bool, error) {
	id, key, err := submissionArgs(in)
	if err != nil {
		return nil, false, fmt.Errorf("creating submission: %w", err)
	}
	var (
		out      *Submission
		existing bool
		created  bool // f created the session
	)
	err = s.writeThen(ctx, func(ctx context.Context, tx *sql.Tx) error {
		t := now()
		var (
			pk  int64
			err error
		)
		pk, created, err = s.ensureSession(ctx, tx, in.Tenant, in.Agent, in.SessionID, t)
		if err != nil {
			return err
		}
		out, existing, err = s.queueSubmission(ctx, tx, pk, id, key, in, limits, t)
		return err
	}, s.invalidateIf(&created, cacheKey{in.Tenant, in.SessionID}))
	if err != nil {
		return nil, false, fmt.Errorf("creating submission: %w", err)
	}
	return out, existing, nil
}

// queueSubmission stores in as queued at t in the session pk, within
// limits, with the id and key submissionArgs gave; when key is taken in the
// session it returns that submission with existing true.
func (s *SQLite) queueSubmission(ctx context.Context, tx *sql.Tx, pk int64, id string, key any, in *Submission,
	limits QueueLimits, t time.Time) (out *Submission, existing bool, err error) {
	if key != nil {
		out, err = scanSubmission(tx.StmtContext(ctx, s.q.submissionByKey).QueryRowContext(ctx, pk, key))
		if err == nil {
			return out, true, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
	}
	if limits != (QueueLimits{}) {
		var session, all int
		if err := tx.StmtContext(ctx, s.q.countQueue).QueryRowContext(ctx, pk, in.Tenant).Scan(&session, &all); err != nil {
			return nil, false, err
		}
		if err := queueFull(session, all, limits); err != nil {
			return nil, false, err
		}
	}
	out, err = scanSubmission(tx.StmtContext(ctx, s.q.insertSubmission).QueryRowContext(ctx,
		id, pk, in.Tenant, in.SessionID, in.Agent, key, string(in.Request), StatusQueued, nanos(t), nanos(t)))
	if isConstraint(err) {
		return nil, false, fmt.Errorf("%w: submission id %q is taken", ErrConflict, id)
	}
	return out, false, err
}

// GetSubmission implements Store.
func (s *SQLite) GetSubmission(ctx context.Context, tenant, sessionID, id string) (*Submission, error) {
	sub, err := scanSubmission(s.q.readSubmission.QueryRowContext(ctx, id, tenant, sessionID))
	if err != nil {
		return nil, fmt.Errorf("reading submission: %w", err)
	}
	return sub, nil
}

// RecordTurn implements Store.
func (s *SQLite) RecordTurn(ctx context.Context, t *TurnRecord) error {
	args, err := turnArgs(t)
	if err != nil {
		return fmt.Errorf("recording turn: %w", err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, s.q.recordTurn).ExecContext(ctx, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("recording turn: %w", err)
	}
	return nil
}

// turnArgs are the arguments of the recordTurn statement for t.
func turnArgs(t *TurnRecord) ([]any, error) {
	usage, err := json.Marshal(t.Usage)
	if err != nil {
		return nil, fmt.Errorf("encoding usage: %w", err)
	}
	return []any{t.RequestID, t.Tenant, t.SessionID, t.Agent, t.Status, t.FinishReason, t.Error, string(usage),
		t.RuleRevision, nanos(t.StartedAt), nanos(t.FinishedAt)}, nil
}

// Turns implements Store.
func (s *SQLite) Turns(ctx context.Context, tenant, sessionID string) ([]TurnRecord, error) {
	rows, err := s.q.turns.QueryContext(ctx, tenant, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading turns: %w", err)
	}
	defer rows.Close()
	turns := []TurnRecord{}
	for rows.Next() {
		t, err := scanTurn(rows)
		if err != nil {
			return nil, fmt.Errorf("reading turns: %w", err)
		}
		turns = append(turns, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading turns: %w", err)
	}
	return turns, nil
}

// turnColumns are the columns scanTurn reads, in order.
const turnColumns = `request_id, tenant, session_id, agent, status, finish_reason, error,
	usage, rule_revision, started_at, finished_at`

// scanTurn reads one row of turnColumns.
func scanTurn(row rowScanner) (TurnRecord, error) {
	var (
		t                 TurnRecord
		usage             []byte
		started, finished int64
	)
	if err := row.Scan(&t.RequestID, &t.Tenant, &t.SessionID, &t.Agent, &t.Status, &t.FinishReason, &t.Error,
		&usage, &t.RuleRevision, &started, &finished); err != nil {
		return TurnRecord{}, err
	}
	if err := json.Unmarshal(usage, &t.Usage); err != nil {
		return TurnRecord{}, fmt.Errorf("decoding usage: %w", err)
	}
	t.StartedAt, t.FinishedAt = fromNanos(started), fromNanos(finished)
	return t, nil
}

// getSession reads the tenant's session id with q, a session statement.
func getSession(ctx context.Context, q *sql.Stmt, tenant, id string) (*Session, error) {
	return scanSession(q.QueryRowContext(ctx, tenant, id), tenant, id)
}

// rowScanner is a row of a query of either driver: *sql.Row, *sql.Rows,
// pgx.Row or pgx.Rows. Both drivers' "no rows" errors are sql.ErrNoRows.
type rowScanner interface {
	Scan(dest ...any) error
}

// scanSession reads the row of selectSession for the tenant's session id;
// ErrNotFound when there is none.
func scanSession(row rowScanner, tenant, id string) (*Session, error) {
	var (
		agent            string
		body             []byte
		created, updated int64
	)
	err := row.Scan(&agent, &body, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return newSession(tenant, id, agent, body, created, updated), nil
}

// newSession builds a Session from its stored columns.
func newSession(tenant, id, agent string, lastBody []byte, created, updated int64) *Session {
	sess := &Session{ID: id, Tenant: tenant, Agent: agent, CreatedAt: fromNanos(created), UpdatedAt: fromNanos(updated)}
	if lastBody != nil {
		sess.LastBody = json.RawMessage(lastBody)
	}
	return sess
}

// ensureSession creates the tenant's session id for agent unless it exists,
// and returns its key and whether it was created.
func (s *SQLite) ensureSession(ctx context.Context, tx *sql.Tx, tenant, agent, id string, t time.Time) (int64, bool, error) {
	res, err := tx.StmtContext(ctx, s.q.insertSession).ExecContext(ctx, tenant, id, agent, nanos(t), nanos(t))
	if err != nil {
		return 0, false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, err
	}
	pk, err := s.sessionPK(ctx, tx, tenant, id)
	return pk, n > 0, err
}

// sessionPK returns the key of the tenant's session id, or ErrNotFound.
func (s *SQLite) sessionPK(ctx context.Context, tx *sql.Tx, tenant, id string) (int64, error) {
	var pk int64
	err := tx.StmtContext(ctx, s.q.sessionPK).QueryRowContext(ctx, tenant, id).Scan(&pk)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return pk, err
}

// touchSession sets the updated_at of the tenant's session id to t and
// returns its key, or ErrNotFound.
func (s *SQLite) touchSession(ctx context.Context, tx *sql.Tx, tenant, id string, t int64) (int64, error) {
	var pk int64
	err := tx.StmtContext(ctx, s.q.touchSession).QueryRowContext(ctx, t, tenant, id).Scan(&pk)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return pk, err
}

// scanSubmission reads one row of submissionColumns; ErrNotFound when there
// is none.
func scanSubmission(row rowScanner) (*Submission, error) {
	var (
		sub              Submission
		request, result  []byte
		created, updated int64
	)
	err := row.Scan(&sub.ID, &sub.Tenant, &sub.SessionID, &sub.Agent, &sub.IdempotencyKey, &request, &sub.Status,
		&result, &sub.Attempts, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	sub.Request = json.RawMessage(request)
	if result != nil {
		sub.Result = json.RawMessage(result)
	}
	sub.CreatedAt, sub.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &sub, nil
}

// affectedOne turns an update that matched no row into ErrNotFound.
func affectedOne(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// isConstraint reports whether err is a SQLite constraint violation.
func isConstraint(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// ignoreDone drops the error of rolling back a transaction that is already
// over (its context ended, which rolls it back).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// nonEmpty returns ErrInvalid naming the first empty value of the
// name, value pairs.
func nonEmpty(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return fmt.Errorf("%w: empty %s", ErrInvalid, pairs[i])
		}
	}
	return nil
}

// jsonArg returns raw as a column value: NULL when empty, else its text,
// which must be valid JSON.
func jsonArg(name string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%w: %s is not JSON", ErrInvalid, name)
	}
	return string(raw), nil
}

// now is the store's clock.
func now() time.Time { return time.Now().UTC() }

// nanos is t in Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos is the inverse of nanos.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
