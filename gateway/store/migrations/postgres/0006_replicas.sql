-- 0006_replicas: several gateway replicas on one database.

-- version counts the changes to a session and its transcript: every write
-- that changes them bumps it in the statement that locks the session's row,
-- so a replica's transcript cache serves an entry only while its version is
-- the stored one (a write by another replica is never served stale).
ALTER TABLE sessions ADD COLUMN version BIGINT NOT NULL DEFAULT 0;

-- session_leases: the turn lease of a session, one row per session that ever
-- ran a turn. token, the fencing token, grows by one at every acquisition and
-- the row is never deleted (a release only expires it), so a token names one
-- holding for good: a write fenced by a token that is no longer the row's is
-- refused. cancelled asks the holder to cancel its turn.
CREATE TABLE session_leases (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    token      BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL,
    cancelled  BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, session_id)
);

-- A running submission is claimed by a replica until lease_until, which the
-- replica renews while it runs; once past, another replica may claim it.
ALTER TABLE submissions ADD COLUMN claimed_by TEXT;
ALTER TABLE submissions ADD COLUMN lease_until BIGINT;

-- stream_chunks relays the UI message stream of a running turn, named by its
-- session and lease token, to readers on other replicas: the owner appends
-- the frames in batches; a row with done ends the stream. The rows go when
-- the session's next turn starts, or after a grace period (see the store).
CREATE TABLE stream_chunks (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    token      BIGINT  NOT NULL,
    seq        BIGINT  NOT NULL,
    frames     BYTEA   NOT NULL,
    done       BOOLEAN NOT NULL DEFAULT false,
    created_at BIGINT  NOT NULL,
    PRIMARY KEY (tenant, session_id, token, seq)
);
CREATE INDEX stream_chunks_age ON stream_chunks (created_at);

-- submissions_queued counts a tenant's queued submissions for the queue limits.
CREATE INDEX submissions_queued ON submissions (tenant, session_pk) WHERE status = 'queued';

-- A submission left running by a binary without claims is taken over at once.
UPDATE submissions SET lease_until = 0 WHERE status = 'running';
