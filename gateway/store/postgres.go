package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turngate/turngate/engine"
)

// sessionLocks is the number of locks that order the writes of a session
// with the transcript cache (see Postgres). Sessions share a lock when their
// hashes collide: 1024 keeps that rare for the hundreds of sessions a
// gateway runs at once, for 8 KiB.
const sessionLocks = 1024

// defaultPoolConns is the pool's size unless the DSN sets pool_max_conns.
// pgxpool's own default, 4 (or the number of CPUs), makes the turns of 64
// sessions queue for connections while each holds one for a transaction's
// round trips; 16 is well below PostgreSQL's default max_connections, 100.
const defaultPoolConns = 16

// Postgres is the Store on a PostgreSQL database, through pgx and its
// connection pool. Each write is one transaction on a pooled connection, so
// writes run concurrently: PostgreSQL's row locks order the writes of one
// session (every write that changes a transcript first updates, and so
// locks, the session's row), and FOR UPDATE SKIP LOCKED keeps two claimers
// from taking the same submission. The pool's size is the DSN's
// pool_max_conns (default defaultPoolConns).
//
// Transcript and Messages read through the same in-process cache of
// decoded transcripts as SQLite's. A write that changes a session holds the
// session's lock in this process from before its first statement until its
// changes are applied to the cache, so they reach the cache in commit
// order; a commit (or a write of one statement) that fails drops the
// session from the cache. Several replicas may share
// the database: every write bumps the session's version (Session.version)
// in the statement that locks its row, a cache hit is served only once a
// read of the stored version matches the entry's, and a write is applied
// to an entry only when the entry holds the version just before it (else
// another replica wrote in between and the entry is dropped).
type Postgres struct {
	pool *pgxpool.Pool

	// transcripts serves Messages and Transcript through the cache (nil
	// when disabled). Its testAfterCommit runs right after a commit.
	transcripts

	// schema is the schema the store lives in (its search_path's first),
	// named in its notifications.
	schema string

	locks     [sessionLocks]sync.Mutex // see sessionLocks
	seed      maphash.Seed             // of the locks' hash
	closeOnce sync.Once
}

var _ Store = (*Postgres)(nil)

// OpenPostgres connects to the PostgreSQL database named by dsn (a URL,
// postgres://user@host:5432/db?…, or key=value pairs, as libpq reads them;
// pool_max_conns sets the pool's size) and migrates it to the newest schema,
// in the first schema of the connection's search_path. Replicas that start
// together take turns: the migration runs in one transaction under an
// advisory lock. A database migrated by a newer binary fails with
// ErrSchemaTooNew. ctx bounds the connection and the migration.
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (*Postgres, error) {
	o := newOptions("", opts)
	if o.synchronous != "" {
		return nil, fmt.Errorf("opening postgres store: %w: synchronous is a SQLite setting", ErrInvalid)
	}
	if dsn == "" {
		return nil, fmt.Errorf("opening postgres store: %w: empty DSN", ErrInvalid)
	}
	cfg, err := pgxpool.ParseConfig(dsn) // its errors hide the DSN's password
	if err != nil {
		return nil, fmt.Errorf("opening postgres store: %w: %v", ErrInvalid, err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = defaultPoolConns
	}
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening postgres store: %w", err)
	}
	ms, err := loadMigrations(migrations, "migrations/postgres")
	if err == nil {
		err = migratePostgres(ctx, pool, ms)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening postgres store: %w", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("opening postgres store: reading the schema: %w", err)
	}
	s := &Postgres{pool: pool, seed: maphash.MakeSeed(), schema: schema}
	s.read = s.readTranscript
	s.version = s.readVersion
	s.cache = o.newCache()
	return s, nil
}

// migrateLock names the advisory lock of migratePostgres, with the schema
// migrated: pg_advisory_xact_lock(int, int) takes two 32-bit keys.
const migrateLock = `SELECT pg_advisory_xact_lock(hashtext('turngate.migrate'), hashtext(current_schema()))`

// migratePostgres applies the migrations newer than the database's version,
// all in one transaction under an advisory lock, and records each in
// schema_migrations. A replica that starts while another migrates waits for
// the lock and then finds nothing left to do.
func migratePostgres(ctx context.Context, pool *pgxpool.Pool, ms []migration) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit.

	if _, err := tx.Exec(ctx, migrateLock); err != nil {
		return fmt.Errorf("migrating: taking the migration lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at BIGINT  NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrating: creating schema_migrations: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("migrating: reading version: %w", err)
	}
	todo, err := pending(ms, current)
	if err != nil {
		return err
	}
	for _, m := range todo {
		// Without arguments, Exec sends the file as one simple query: all
		// of its statements.
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migrating: applying %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.version, m.name, nanos(now())); err != nil {
			return fmt.Errorf("migrating: recording %04d_%s: %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrating: committing: %w", err)
	}
	return nil
}

// Close closes the pool, waiting for the connections in use to come back.
func (s *Postgres) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// The PostgreSQL store's statements. pgx prepares each on a connection the
// first time it runs there and reuses it after.
const (
	pgSelectSession = `SELECT agent, last_body, created_at, updated_at FROM sessions WHERE tenant = $1 AND id = $2`
	// One statement, so the session and its transcript are one snapshot:
	// no session gives no rows, an empty transcript one row with a NULL
	// body.
	pgTranscript = `SELECT s.agent, s.last_body, s.created_at, s.updated_at, s.version, m.message_id, m.body
		FROM sessions s LEFT JOIN messages m ON m.session_pk = s.pk
		WHERE s.tenant = $1 AND s.id = $2 ORDER BY m.position`
	pgInsertSession = `INSERT INTO sessions (tenant, id, agent, created_at, updated_at, version)
		VALUES ($1, $2, $3, $4, $4, 1) ON CONFLICT (tenant, id) DO NOTHING RETURNING pk`
	pgSessionPK = `SELECT pk FROM sessions WHERE tenant = $1 AND id = $2`
	// Every write that changes a session or its transcript bumps its
	// version in the statement that locks its row (see Session.version).
	pgTouchSession = `UPDATE sessions SET updated_at = $1, version = version + 1
		WHERE tenant = $2 AND id = $3 RETURNING pk, version`
	pgSetLastBody = `UPDATE sessions SET last_body = $1, updated_at = $2, version = version + 1
		WHERE tenant = $3 AND id = $4 RETURNING version`
	// pgAdmit admits a turn: migration 0009's turngate_admit.
	pgAdmit = `SELECT o_agent, o_last_body, o_created_at, o_updated_at, o_version, o_created
		FROM turngate_admit($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	// pgPutMessage appends or replaces a message, fenced by the lease
	// token $3 and releasing it with $4: turngate_put_message.
	pgPutMessage = `SELECT o_version, o_released FROM turngate_put_message($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`
	// pgFinishTurn is pgPutMessage that also records the turn ($12…$22,
	// pgRecordTurn's arguments) once the message is stored, in the same
	// statement: a refused put raises, and the record is not stored either.
	pgFinishTurn = `WITH p AS (` + pgPutMessage + `),
		r AS (INSERT INTO turns (request_id, tenant, session_id, agent, status, finish_reason,
			error, usage, rule_revision, started_at, finished_at)
			SELECT $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22 FROM p
			WHERE NOT EXISTS (SELECT 1 FROM turns WHERE tenant = $13 AND session_id = $14 AND request_id = $12 AND started_at = $21))
		SELECT o_version, o_released FROM p`
	pgSessionVersion  = `SELECT version FROM sessions WHERE tenant = $1 AND id = $2`
	pgMessagePosition = `SELECT position FROM messages WHERE session_pk = $1 AND message_id = $2`
	pgTruncate        = `DELETE FROM messages WHERE session_pk = $1 AND position >= $2`
	pgReadSubmission  = `SELECT ` + submissionColumns + ` FROM submissions
		WHERE id = $1 AND tenant = $2 AND session_id = $3`
	pgSubmissionByKey = `SELECT ` + submissionColumns + ` FROM submissions
		WHERE session_pk = $1 AND idempotency_key = $2`
	// A repeated key inserts nothing (the caller then reads the earlier
	// submission); a taken id is a unique violation.
	pgInsertSubmission = `INSERT INTO submissions
		(id, session_pk, tenant, session_id, agent, idempotency_key, request, status, attempts, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', 0, $8, $8)
		ON CONFLICT (session_pk, idempotency_key) DO NOTHING RETURNING ` + submissionColumns
	// pgRecordTurn stores a turn's record once: a retried write whose
	// first attempt's outcome was unknown stores nothing the second time
	// (a turn is its request id and start; a submission's re-run has
	// another start).
	pgRecordTurn = `INSERT INTO turns (request_id, tenant, session_id, agent, status, finish_reason,
		error, usage, rule_revision, started_at, finished_at) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11
		WHERE NOT EXISTS (SELECT 1 FROM turns WHERE tenant = $2 AND session_id = $3 AND request_id = $1 AND started_at = $10)`
	pgTurns = `SELECT ` + turnColumns + ` FROM turns WHERE tenant = $1 AND session_id = $2 ORDER BY seq`
)

// write runs f in a transaction and commits it. When after is not nil, f
// changes the session k: write then holds k's lock from BEGIN until after
// has applied the committed changes to the cache, so the writes of a
// session reach the cache in their commit order; a failed commit drops k
// from the cache instead, since whether it stored anything is unknown.
//
// Cancelling ctx before the transaction has begun returns ctx's error and
// f never runs. Once begun, the transaction runs to its end without ctx's
// cancellation, as SQLite's writes do: a write is never reported failed and
// stored (a cancelled COMMIT leaves its outcome unknown).
func (s *Postgres) write(ctx context.Context, k cacheKey, f func(ctx context.Context, tx pgx.Tx) error, after func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.lockSession(k, after)()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return pgError(err)
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit.
	if err := f(ctx, tx); err != nil {
		return pgError(err)
	}
	return s.commit(k, after, func() error { return tx.Commit(ctx) })
}

// writeStatement is write for a write of one statement, which PostgreSQL
// commits on its own (migration 0009's functions make the writes of a turn
// one statement each): one round trip, where a transaction adds a BEGIN and
// a COMMIT. f sends the statement on conn. A failed statement drops k from
// the cache, as a failed commit does.
func (s *Postgres) writeStatement(ctx context.Context, k cacheKey, f func(ctx context.Context, conn *pgxpool.Conn) error, after func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer s.lockSession(k, after)()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return pgError(err)
	}
	defer conn.Release()
	ctx, cancel := detach(ctx)
	defer cancel()
	return s.commit(k, after, func() error { return f(ctx, conn) })
}

// lockSession takes the lock of the session k for a write whose after
// applies it to the cache (none when after is nil), and returns its unlock.
func (s *Postgres) lockSession(k cacheKey, after func()) (unlock func()) {
	if after == nil {
		return func() {}
	}
	mu := &s.locks[maphash.Comparable(s.seed, k)%sessionLocks]
	mu.Lock()
	return mu.Unlock
}

// commit runs commit, which commits a write of the session k, and then
// after (see write), if any, or drops k from the cache when it failed.
func (s *Postgres) commit(k cacheKey, after func(), commit func() error) error {
	if after == nil {
		return pgError(commit())
	}
	c := s.cache // not nil when after is not
	c.beginCommit()
	defer c.endCommit()
	err := commit()
	if s.testAfterCommit != nil {
		s.testAfterCommit()
	}
	if err != nil {
		c.invalidate(k)
		return pgError(err)
	}
	runAfter(c, after)
	return nil
}

// detach returns ctx without its cancellation, for a write that must run
// to its end once begun (see write), but with its deadline, the store's
// bound on a call (Bounded): a database that stops answering mid-write
// fails the write at the deadline, its outcome unknown, instead of holding
// it as long as it is frozen.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok {
		return context.WithoutCancel(ctx), func() {}
	}
	return context.WithDeadline(context.WithoutCancel(ctx), d)
}

// pgError turns PostgreSQL's refusal of text that is not UTF-8 or holds a
// NUL byte, which a TEXT column cannot store, into ErrInvalid, and the
// refusals migration 0009's functions raise into ErrFenced and ErrNotFound.
func pgError(err error) error {
	var e *pgconn.PgError
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case "22021", "22P05":
		return fmt.Errorf("%w: %s", ErrInvalid, e.Message)
	case pgFencedOut:
		return ErrFenced
	case pgSessionNotFound:
		return ErrNotFound
	}
	return err
}

// The SQLSTATEs migration 0009's functions raise.
const (
	pgFencedOut       = "TG001"
	pgSessionNotFound = "TG002"
)

// isUniqueViolation reports whether err is PostgreSQL's unique_violation.
func isUniqueViolation(err error) bool {
	var e *pgconn.PgError
	return errors.As(err, &e) && e.Code == "23505"
}

// GetOrCreateSession implements Store.
func (s *Postgres) GetOrCreateSession(ctx context.Context, tenant, agent, id string) (*Session, bool, error) {
	if err := nonEmpty("tenant", tenant, "session id", id, "agent", agent); err != nil {
		return nil, false, fmt.Errorf("creating session: %w", err)
	}
	// Most calls find the session; only a miss writes.
	sess, err := s.GetSession(ctx, tenant, id)
	if !errors.Is(err, ErrNotFound) {
		return sess, false, err
	}
	var created bool
	k := cacheKey{tenant, id}
	err = s.write(ctx, k, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if _, created, err = pgEnsureSession(ctx, tx, tenant, agent, id, nanos(now())); err != nil {
			return err
		}
		sess, err = scanSession(tx.QueryRow(ctx, pgSelectSession, tenant, id), tenant, id)
		return err
	}, s.invalidateIf(&created, k))
	if err != nil {
		return nil, false, fmt.Errorf("creating session: %w", err)
	}
	return sess, created, nil
}

// GetSession implements Store.
func (s *Postgres) GetSession(ctx context.Context, tenant, id string) (*Session, error) {
	sess, err := scanSession(s.pool.QueryRow(ctx, pgSelectSession, tenant, id), tenant, id)
	if err != nil {
		return nil, fmt.Errorf("reading session: %w", pgError(err))
	}
	return sess, nil
}

// SetLastBody implements Store.
func (s *Postgres) SetLastBody(ctx context.Context, tenant, id string, body json.RawMessage) error {
	v, err := jsonArg("last body", body)
	if err != nil {
		return fmt.Errorf("setting last body: %w", err)
	}
	var t, version int64
	k := cacheKey{tenant, id}
	err = s.write(ctx, k, func(ctx context.Context, tx pgx.Tx) error {
		if err := pgCheckFence(ctx, tx, tenant, id); err != nil {
			return err
		}
		t = nanos(now())
		err := tx.QueryRow(ctx, pgSetLastBody, v, t, tenant, id).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			err = ErrNotFound
		}
		return err
	}, s.afterSetLastBody(k, body, &t, &version))
	if err != nil {
		return fmt.Errorf("setting last body: %w", err)
	}
	return nil
}

// Admit implements Store: one statement (turngate_admit).
func (s *Postgres) Admit(ctx context.Context, tenant, agent, sessionID string, lastBody json.RawMessage, user *engine.UIMessage) (*Session, error) {
	v, body, err := admitArgs(tenant, agent, sessionID, lastBody, user)
	if err != nil {
		return nil, fmt.Errorf("admitting turn: %w", err)
	}
	k := cacheKey{tenant, sessionID}
	var a admission
	after, err := s.afterAdmit(k, user, body, &a)
	if err != nil {
		return nil, fmt.Errorf("admitting turn: %w", err)
	}
	var id, role any // NULL: no user message
	if user != nil {
		id, role = []byte(user.ID), user.Role
	}
	err = s.writeStatement(ctx, k, func(ctx context.Context, conn *pgxpool.Conn) error {
		t := nanos(now())
		var (
			owner            string
			last             []byte
			created, updated int64
			version          *int64 // NULL: another agent's session
		)
		err := conn.QueryRow(ctx, pgAdmit, tenant, sessionID, agent, fenceToken(ctx, tenant, sessionID), v, t, id, role, body).
			Scan(&owner, &last, &created, &updated, &version, &a.created)
		switch {
		case isUniqueViolation(err):
			return messageConflict(user.ID)
		case err != nil:
			return err
		case version == nil:
			a.sess = newSession(tenant, sessionID, owner, last, created, updated)
			return nil
		}
		a.sess, a.admitted = admitted(tenant, sessionID, agent, lastBody, created, t), true
		a.sess.version = *version
		return nil
	}, after)
	if err != nil {
		return nil, fmt.Errorf("admitting turn: %w", err)
	}
	return a.sess, nil
}

// readTranscript reads the session and its messages with one statement, so
// they are one snapshot.
func (s *Postgres) readTranscript(ctx context.Context, tenant, sessionID string) (*Session, []cachedMessage, error) {
	rows, err := s.pool.Query(ctx, pgTranscript, tenant, sessionID)
	if err != nil {
		return nil, nil, pgError(err)
	}
	defer rows.Close()
	var sess *Session
	msgs := []cachedMessage{}
	for rows.Next() {
		var (
			agent                     string
			lastBody, id, body        []byte
			created, updated, version int64
		)
		if err := rows.Scan(&agent, &lastBody, &created, &updated, &version, &id, &body); err != nil {
			return nil, nil, err
		}
		if err := transcriptRow(&sess, &msgs, tenant, sessionID, agent, lastBody, created, updated, id, body); err != nil {
			return nil, nil, err
		}
		sess.version = version
	}
	if err := rows.Err(); err != nil {
		return nil, nil, pgError(err)
	}
	if sess == nil {
		return nil, nil, ErrNotFound
	}
	return sess, msgs, nil
}

// AppendMessage implements Store.
func (s *Postgres) AppendMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage) error {
	if err := s.putMessage(ctx, tenant, sessionID, m, false, nil); err != nil {
		return fmt.Errorf("appending message: %w", err)
	}
	return nil
}

// UpsertMessage implements Store.
func (s *Postgres) UpsertMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage) error {
	if err := s.putMessage(ctx, tenant, sessionID, m, true, nil); err != nil {
		return fmt.Errorf("upserting message: %w", err)
	}
	return nil
}

// FinishTurn implements Store: the message and the record in one
// transaction.
func (s *Postgres) FinishTurn(ctx context.Context, tenant, sessionID string, m engine.UIMessage, rec *TurnRecord) error {
	args, err := finishTurnArgs(tenant, sessionID, rec)
	if err != nil {
		return fmt.Errorf("finishing turn: %w", err)
	}
	if err := s.putMessage(ctx, tenant, sessionID, m, true, args); err != nil {
		return fmt.Errorf("finishing turn: %w", err)
	}
	return nil
}

// putMessage appends m to the session, or with replace first tries to
// replace the message with m.ID in place; with turn (the arguments of
// pgRecordTurn) it also records the turn, and releases the lease when ctx
// asks for it (WithRelease), in the same statement.
func (s *Postgres) putMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage, replace bool, turn []any) error {
	body, err := encodeMessage(m)
	if err != nil {
		return err
	}
	k := cacheKey{tenant, sessionID}
	var t, version int64
	after, err := s.afterPut(k, m.ID, body, &t, &version, replace)
	if err != nil {
		return err
	}
	token := fenceToken(ctx, tenant, sessionID)
	var (
		release  *finishRelease
		payload  string // the waiters' wake-up, when the release is asked
		released bool
	)
	if turn != nil {
		if release = releaseOf(ctx, tenant, sessionID); release != nil {
			token, payload = release.lease.Token, s.payload(tenant, sessionID, release.lease.Token)
		}
	}
	err = s.writeStatement(ctx, k, func(ctx context.Context, conn *pgxpool.Conn) error {
		t = nanos(now())
		q, args := pgPutMessage, []any{tenant, sessionID, token, release != nil, ChannelLease, payload, t, []byte(m.ID), m.Role, body, replace}
		if turn != nil {
			q, args = pgFinishTurn, append(args, turn...)
		}
		err := conn.QueryRow(ctx, q, args...).Scan(&version, &released)
		if isUniqueViolation(err) {
			return messageConflict(m.ID)
		}
		return err
	}, after)
	if err == nil && released {
		*release.released = true
	}
	return err
}

// messageConflict is the error of a message whose id the session holds
// already.
func messageConflict(id string) error {
	return fmt.Errorf("%w: message %q is already in the session", ErrConflict, id)
}

// fenceToken returns the token of the lease ctx carries for the tenant's
// session (see WithLease) as the argument of a write's statement: NULL, no
// fence, when it carries none.
func fenceToken(ctx context.Context, tenant, sessionID string) any {
	if l := fenceOf(ctx, tenant, sessionID); l != nil {
		return l.Token
	}
	return nil
}

// TruncateAfter implements Store.
func (s *Postgres) TruncateAfter(ctx context.Context, tenant, sessionID, messageID string, inclusive bool) error {
	truncated := true
	k := cacheKey{tenant, sessionID}
	err := s.write(ctx, k, func(ctx context.Context, tx pgx.Tx) error {
		if err := pgCheckFence(ctx, tx, tenant, sessionID); err != nil {
			return err
		}
		pk, _, err := pgTouch(ctx, tx, tenant, sessionID, nanos(now()))
		if err != nil {
			return err
		}
		var pos int64
		err = tx.QueryRow(ctx, pgMessagePosition, pk, []byte(messageID)).Scan(&pos)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("message %q: %w", messageID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		if !inclusive {
			pos++
		}
		_, err = tx.Exec(ctx, pgTruncate, pk, pos)
		return err
	}, s.invalidateIf(&truncated, k))
	if err != nil {
		return fmt.Errorf("truncating messages: %w", err)
	}
	return nil
}

// CreateSubmission implements Store.
func (s *Postgres) CreateSubmission(ctx context.Context, in *Submission, limits QueueLimits) (*Submission, bool, error) {
	id, key, err := submissionArgs(in)
	if err != nil {
		return nil, false, fmt.Errorf("creating submission: %w", err)
	}
	var (
		out      *Submission
		existing bool
		created  bool // the write created the session
	)
	k := cacheKey{in.Tenant, in.SessionID}
	err = s.write(ctx, k, func(ctx context.Context, tx pgx.Tx) error {
		t := nanos(now())
		pk, c, err := pgEnsureSession(ctx, tx, in.Tenant, in.Agent, in.SessionID, t)
		if err != nil {
			return err
		}
		created = c
		out, existing, err = pgQueueSubmission(ctx, tx, pk, id, key, in, limits, t)
		return err
	}, s.invalidateIf(&created, k))
	if err != nil {
		return nil, false, fmt.Errorf("creating submission: %w", err)
	}
	return out, existing, nil
}

// pgQueueSubmission stores in as queued at t (Unix nanoseconds) in the
// session pk, within limits, with the id and key submissionArgs gave; when
// key is taken in the session it returns that submission with existing
// true.
func pgQueueSubmission(ctx context.Context, tx pgx.Tx, pk int64, id string, key any, in *Submission,
	limits QueueLimits, t int64) (out *Submission, existing bool, err error) {
	if limits != (QueueLimits{}) {
		if out, err = pgCheckQueue(ctx, tx, in.Tenant, pk, key, limits); out != nil || err != nil {
			return out, out != nil, err
		}
	}
	out, err = scanSubmission(tx.QueryRow(ctx, pgInsertSubmission,
		id, pk, in.Tenant, in.SessionID, in.Agent, key, string(in.Request), t))
	switch {
	case isUniqueViolation(err):
		return nil, false, fmt.Errorf("%w: submission id %q is taken", ErrConflict, id)
	case errors.Is(err, ErrNotFound):
		// The key is taken: its submission, committed before this
		// statement ended, is what a new statement sees.
		out, err = scanSubmission(tx.QueryRow(ctx, pgSubmissionByKey, pk, key))
		return out, err == nil, err
	}
	return out, false, err
}

// GetSubmission implements Store.
func (s *Postgres) GetSubmission(ctx context.Context, tenant, sessionID, id string) (*Submission, error) {
	sub, err := scanSubmission(s.pool.QueryRow(ctx, pgReadSubmission, id, tenant, sessionID))
	if err != nil {
		return nil, fmt.Errorf("reading submission: %w", pgError(err))
	}
	return sub, nil
}

// RecordTurn implements Store.
func (s *Postgres) RecordTurn(ctx context.Context, t *TurnRecord) error {
	args, err := turnArgs(t)
	if err != nil {
		return fmt.Errorf("recording turn: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("recording turn: %w", err)
	}
	// One statement is its own transaction; once sent it runs to its end,
	// as write's transactions do.
	ctx, cancel := detach(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, pgRecordTurn, args...); err != nil {
		return fmt.Errorf("recording turn: %w", pgError(err))
	}
	return nil
}

// Turns implements Store.
func (s *Postgres) Turns(ctx context.Context, tenant, sessionID string) ([]TurnRecord, error) {
	rows, err := s.pool.Query(ctx, pgTurns, tenant, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading turns: %w", pgError(err))
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
		return nil, fmt.Errorf("reading turns: %w", pgError(err))
	}
	return turns, nil
}

// pgEnsureSession creates the tenant's session id for agent at t unless it
// exists, and returns its key and whether it was created. A concurrent
// creation of the same session makes the insert wait for it, then do
// nothing; the select, a new statement, then sees it.
func pgEnsureSession(ctx context.Context, tx pgx.Tx, tenant, agent, id string, t int64) (int64, bool, error) {
	var pk int64
	err := tx.QueryRow(ctx, pgInsertSession, tenant, id, agent, t).Scan(&pk)
	if err == nil {
		return pk, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, err
	}
	err = tx.QueryRow(ctx, pgSessionPK, tenant, id).Scan(&pk)
	return pk, false, err
}

// pgTouch sets the updated_at of the tenant's session id to t and bumps its
// version, which locks its row until the transaction ends, and returns its
// key and new version, or ErrNotFound.
func pgTouch(ctx context.Context, tx pgx.Tx, tenant, id string, t int64) (pk, version int64, err error) {
	err = tx.QueryRow(ctx, pgTouchSession, t, tenant, id).Scan(&pk, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, ErrNotFound
	}
	return pk, version, err
}
