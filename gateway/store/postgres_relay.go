package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Relay is what a store shared by several gateway replicas adds for them:
// the UI message stream of a running turn relayed through the database, so
// a client resumes it on any replica; the queue of the requests waiting for
// a session's lease, in one order across replicas; and notifications that
// wake the replicas. Postgres implements it; SQLite, whose file serves one
// process, does not (its process relays streams in memory, and queues
// requests with its in-process lock).
//
// A stream is relayed only while a reader follows it: the reader asks for
// it (FollowStream), and the lease's holder, told by a notification or its
// next renewal, relays it from its first chunk and releases the lease only
// after its last batch (ReleaseUnfollowed refuses to release it earlier).
type Relay interface {
	// AppendChunk stores frames, the next batch of the stream of lease l's
	// turn, as batch seq (0, 1, 2… in order), done marking the last, and
	// notifies ChannelStream. One statement: the caller batches frames
	// (see gateway/replicas.go), never one round trip per frame.
	AppendChunk(ctx context.Context, l *Lease, seq int64, frames []byte, done bool) error
	// FollowStream asks the holder of the session's unexpired lease to
	// relay its turn's stream: it marks the lease followed (RenewLease
	// reports it) and notifies ChannelFollow. It returns the lease's token,
	// the stream's name; ok is false when no unexpired lease is held.
	FollowStream(ctx context.Context, tenant, sessionID string) (token int64, ok bool, err error)
	// ReleaseUnfollowed releases l, as Store.ReleaseLease does, unless a
	// reader follows its stream: then it reports false and leaves the
	// lease to the holder, which relays the stream before it releases it.
	// It also reports false when l is no longer the session's lease.
	ReleaseUnfollowed(ctx context.Context, l *Lease) (bool, error)
	// LiveStream returns the lease token of the session's running turn:
	// its stream's name; ok is false when no unexpired lease is held.
	LiveStream(ctx context.Context, tenant, sessionID string) (token int64, ok bool, err error)
	// ReadChunks returns up to limit batches of the stream token of the
	// session, from batch seq from on, in order.
	ReadChunks(ctx context.Context, tenant, sessionID string, token, from int64, limit int) ([]Chunk, error)
	// SweepStreams deletes the batches older than age of streams whose
	// turn's lease is no longer live (the turn ended, or its replica died).
	SweepStreams(ctx context.Context, age time.Duration) (int, error)
	// ReportRevision records r, what replica r.Replica serves now, in
	// place of what it reported before.
	ReportRevision(ctx context.Context, r ReplicaRevision) error
	// ReplicaRevisions returns what each replica last reported, by replica
	// name, at most MaxReplicas of them.
	ReplicaRevisions(ctx context.Context) ([]ReplicaRevision, error)
	// Enqueue registers a request of owner, which found the session's
	// lease held (AcquireLease failed with ErrLeaseHeld), in the session's
	// queue, behind the live waiters registered before it: the lease goes
	// to the waiters in that order (AcquireQueued), and AcquireLease
	// leaves it to them. A counted waiter (an HTTP request; a submission
	// worker is not, the submission table is its queue) fails with
	// ErrTurnQueueFull when bound counted waiters of the session are
	// live. The place lives for ttl; its replica renews it (RenewWaiters)
	// while it waits.
	Enqueue(ctx context.Context, tenant, sessionID, owner string, counted bool, bound int, ttl time.Duration) (*Waiter, error)
	// AcquireQueued takes the session's lease for w's owner until ttl from
	// now, as AcquireLease does, when it is free and no live waiter is
	// before w, and removes w from the queue in the same statement; it
	// fails with ErrLeaseHeld while w must wait on, and with ErrNotQueued
	// when w's place is gone. The waiters are woken on ChannelLease when
	// the lease is released.
	AcquireQueued(ctx context.Context, w *Waiter, ttl time.Duration) (*Lease, error)
	// Dequeue removes w, a waiter that gives up, from the queue, waking the
	// others (ChannelLease) when the lease is free.
	Dequeue(ctx context.Context, w *Waiter) error
	// RenewWaiters extends the places ids, those still live, to ttl from
	// now, in one statement; an expired place is not renewed.
	RenewWaiters(ctx context.Context, ids []int64, ttl time.Duration) error
	// SweepWaiters deletes the expired places (of replicas that died).
	SweepWaiters(ctx context.Context) (int, error)
	// Listen calls f with each notification of any replica (ChannelStream,
	// ChannelCancel, ChannelLease, ChannelFollow, ChannelKillSwitch,
	// ChannelErased) on a connection of its own, until ctx is done; it
	// returns the error that broke the connection, so the caller listens
	// again (it may have missed notifications meanwhile).
	Listen(ctx context.Context, ready func(), f func(Notification)) error
}

// Chunk is one batch of a relayed stream.
type Chunk struct {
	Seq    int64
	Frames []byte
	Done   bool
}

// The notification channels.
const (
	// ChannelStream: a batch of the session's stream was stored.
	ChannelStream = "turngate_stream"
	// ChannelFollow: FollowStream asked the holder of the session's lease
	// (the one with Token) to relay its turn's stream.
	ChannelFollow = "turngate_follow"
	// ChannelCancel: CancelLease asked the holder of the session's lease
	// (the one with Token) to cancel its turn.
	ChannelCancel = "turngate_cancel"
	// ChannelLease: the session's lease was released (Token), or a waiter
	// left while it was free (Token 0), and waiters are queued for it.
	ChannelLease = "turngate_lease"
)

// Notification is one notification a replica sent (see Relay.Listen).
// Channels are database-wide, so a notification names the schema of the
// store that sent it: gateways on other schemas of the same database ignore
// it (their sessions and lease tokens are another namespace).
type Notification struct {
	Channel   string `json:"-"`
	Schema    string `json:"n"`
	Tenant    string `json:"t"`
	SessionID string `json:"s"`
	Token     int64  `json:"k"`
}

var _ Relay = (*Postgres)(nil)

const (
	// Committed without waiting for the WAL flush (pgAsyncCommit).
	pgAppendChunk = `WITH ins AS (
			INSERT INTO stream_chunks (tenant, session_id, token, seq, frames, done, created_at)
			SELECT $1, $2, $3, $4, $5, $6, $7 WHERE ` + pgAsyncCommit + ` RETURNING 1)
		SELECT pg_notify($8, $9) FROM ins`
	// The notification's payload is Notification's JSON, built here
	// since it names the token the update finds.
	pgFollowStream = `WITH f AS (
			UPDATE session_leases SET followed = true
			WHERE tenant = $1 AND session_id = $2 AND expires_at > ` + pgNow + ` RETURNING token)
		SELECT token, pg_notify($3, json_build_object('n', $4::text, 't', $1::text, 's', $2::text, 'k', token)::text) FROM f`
	pgLiveStream = `SELECT token FROM session_leases
		WHERE tenant = $1 AND session_id = $2 AND expires_at > ` + pgNow
	pgReadChunks = `SELECT seq, frames, done FROM stream_chunks
		WHERE tenant = $1 AND session_id = $2 AND token = $3 AND seq >= $4 ORDER BY seq LIMIT $5`
	// Only the batches of streams whose lease is no longer live: a long
	// turn keeps its first batches.
	pgSweepStreams = `DELETE FROM stream_chunks c WHERE c.created_at < $1 AND NOT EXISTS (
		SELECT 1 FROM session_leases l WHERE l.tenant = c.tenant AND l.session_id = c.session_id
		AND l.token = c.token AND l.expires_at > ` + pgNow + `)`
)

// payload encodes a notification's payload, with the store's schema.
func (s *Postgres) payload(tenant, sessionID string, token int64) string {
	b, _ := json.Marshal(Notification{Schema: s.schema, Tenant: tenant, SessionID: sessionID, Token: token})
	return string(b)
}

// notify sends a notification on channel in tx: delivered when tx commits.
func (s *Postgres) notify(ctx context.Context, tx pgx.Tx, channel, tenant, sessionID string, token int64) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, s.payload(tenant, sessionID, token))
	return err
}

// AppendChunk implements Relay.
func (s *Postgres) AppendChunk(ctx context.Context, l *Lease, seq int64, frames []byte, done bool) error {
	if frames == nil {
		frames = []byte{}
	}
	_, err := s.pool.Exec(ctx, pgAppendChunk, l.Tenant, l.SessionID, l.Token, seq, frames, done, nanos(now()),
		ChannelStream, s.payload(l.Tenant, l.SessionID, l.Token))
	if err != nil {
		return fmt.Errorf("relaying stream: %w", pgError(err))
	}
	return nil
}

// FollowStream implements Relay.
func (s *Postgres) FollowStream(ctx context.Context, tenant, sessionID string) (int64, bool, error) {
	var token int64
	err := s.pool.QueryRow(ctx, pgFollowStream, tenant, sessionID, ChannelFollow, s.schema).Scan(&token, nil)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("following stream: %w", pgError(err))
	}
	return token, true, nil
}

// ReleaseUnfollowed implements Relay.
func (s *Postgres) ReleaseUnfollowed(ctx context.Context, l *Lease) (bool, error) {
	var n int
	err := s.pool.QueryRow(ctx, pgReleaseUnfollowed, l.Tenant, l.SessionID, l.Token, ChannelLease, s.payload(l.Tenant, l.SessionID, l.Token)).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("releasing lease: %w", pgError(err))
	}
	return n == 1, nil
}

// LiveStream implements Relay.
func (s *Postgres) LiveStream(ctx context.Context, tenant, sessionID string) (int64, bool, error) {
	var token int64
	err := s.pool.QueryRow(ctx, pgLiveStream, tenant, sessionID).Scan(&token)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading stream: %w", pgError(err))
	}
	return token, true, nil
}

// ReadChunks implements Relay.
func (s *Postgres) ReadChunks(ctx context.Context, tenant, sessionID string, token, from int64, limit int) ([]Chunk, error) {
	rows, err := s.pool.Query(ctx, pgReadChunks, tenant, sessionID, token, from, limit)
	if err != nil {
		return nil, fmt.Errorf("reading stream: %w", pgError(err))
	}
	chunks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Chunk, error) {
		var c Chunk
		err := r.Scan(&c.Seq, &c.Frames, &c.Done)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading stream: %w", pgError(err))
	}
	return chunks, nil
}

// SweepStreams implements Relay.
func (s *Postgres) SweepStreams(ctx context.Context, age time.Duration) (int, error) {
	tag, err := s.pool.Exec(ctx, pgSweepStreams, nanos(now().Add(-age)))
	if err != nil {
		return 0, fmt.Errorf("sweeping streams: %w", pgError(err))
	}
	return int(tag.RowsAffected()), nil
}

// Listen implements Relay. ready, when not nil, is called once the
// connection listens.
func (s *Postgres) Listen(ctx context.Context, ready func(), f func(Notification)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	// The connection ends with LISTEN state on it: it is not given back.
	defer func() { _ = conn.Hijack().Close(context.Background()) }()
	for _, ch := range []string{ChannelStream, ChannelCancel, ChannelLease, ChannelFollow, ChannelKillSwitch, ChannelErased} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return fmt.Errorf("listening: %w", err)
		}
	}
	// ChannelErased's notifications sent while no connection listened are
	// lost: the cache starts empty with each, and empties when it breaks,
	// so no transcript erased meanwhile outlives it here.
	s.resetCache()
	if ready != nil {
		ready()
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			s.resetCache()
			return fmt.Errorf("listening: %w", err)
		}
		var msg Notification
		if json.Unmarshal([]byte(n.Payload), &msg) != nil || msg.Schema != s.schema {
			continue
		}
		msg.Channel = n.Channel
		if msg.Channel == ChannelErased && s.cache != nil {
			// Another replica erased the session: its transcript leaves
			// this cache too, not only at the next read's version check.
			s.cache.invalidate(cacheKey{msg.Tenant, msg.SessionID})
		}
		f(msg)
	}
}

// resetCache empties the transcript cache, if any.
func (s *Postgres) resetCache() {
	if s.cache != nil {
		s.cache.reset()
	}
}

// ReplicaRevision is what a replica of a shared store last reported of
// its live rules (Relay.ReportRevision).
type ReplicaRevision struct {
	Replica  string
	Revision string
	// Files are the revision's rule files, as the gateway reports them
	// (a JSON array).
	Files      json.RawMessage
	ReportedAt time.Time
}

const (
	pgReportRevision = `INSERT INTO replica_revisions (replica, revision, files, reported_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (replica) DO UPDATE SET revision = EXCLUDED.revision, files = EXCLUDED.files, reported_at = EXCLUDED.reported_at`
	pgReplicaRevisions = `SELECT replica, revision, files, reported_at FROM replica_revisions ORDER BY replica LIMIT $1`
)

// MaxReplicas bounds the replicas ReplicaRevisions lists.
const MaxReplicas = 100

// ReportRevision implements Relay.
func (s *Postgres) ReportRevision(ctx context.Context, r ReplicaRevision) error {
	if r.Replica == "" || !json.Valid(r.Files) {
		return fmt.Errorf("%w: a replica's revision needs its replica and its files as JSON", ErrInvalid)
	}
	if _, err := s.pool.Exec(ctx, pgReportRevision, r.Replica, r.Revision, string(r.Files), nanos(r.ReportedAt)); err != nil {
		return fmt.Errorf("reporting the replica's revision: %w", pgError(err))
	}
	return nil
}

// ReplicaRevisions implements Relay.
func (s *Postgres) ReplicaRevisions(ctx context.Context) ([]ReplicaRevision, error) {
	rows, err := s.pool.Query(ctx, pgReplicaRevisions, MaxReplicas)
	if err != nil {
		return nil, fmt.Errorf("reading the replicas' revisions: %w", pgError(err))
	}
	defer rows.Close()
	var out []ReplicaRevision
	for rows.Next() {
		var r ReplicaRevision
		var files string
		var at int64
		if err := rows.Scan(&r.Replica, &r.Revision, &files, &at); err != nil {
			return nil, fmt.Errorf("reading the replicas' revisions: %w", pgError(err))
		}
		r.Files, r.ReportedAt = json.RawMessage(files), fromNanos(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the replicas' revisions: %w", pgError(err))
	}
	return out, nil
}
