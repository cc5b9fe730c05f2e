-- 0007_session_waiters: the requests waiting for a session's turn lease,
-- across the replicas of one database.

-- session_waiters is the queue of a session's turn: a request that finds the
-- lease held registers a row and takes the lease when it is free and no live
-- row of the session has a smaller id (ids are taken under the session's
-- advisory lock, so their order is the order of registration). counted rows
-- (HTTP requests, not submission workers) are bounded by
-- limits.maxQueuedTurnsPerSession. owner names the waiting replica, which
-- renews its rows' expires_at while they wait; the rows of a replica that
-- died expire and are ignored, then deleted by the sweep.
CREATE TABLE session_waiters (
    id         BIGSERIAL PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    counted    BOOLEAN NOT NULL,
    expires_at BIGINT  NOT NULL
);
CREATE INDEX session_waiters_session ON session_waiters (tenant, session_id, id);
