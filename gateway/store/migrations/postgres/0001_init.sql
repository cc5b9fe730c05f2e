-- 0001_init: sessions, their transcripts, durable submissions and the turn audit,
-- as migrations/sqlite/0001_init.sql has them. Times are Unix nanoseconds (UTC),
-- as BIGINT rather than timestamptz, which keeps only microseconds. JSON columns
-- hold text, stored as given (jsonb would reorder keys).

-- sessions: pk is internal; (tenant, id) is what callers name, so two tenants
-- may each own a session with the same client-chosen id without seeing each other.
CREATE TABLE sessions (
    pk         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant     TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    agent      TEXT   NOT NULL,
    last_body  TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (tenant, id)
);

-- messages: the transcript, ordered by position within a session. message_id
-- is bytes: ids that are not UTF-8 stay apart, as they do in SQLite.
CREATE TABLE messages (
    session_pk BIGINT NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
    position   BIGINT NOT NULL,
    message_id BYTEA  NOT NULL,
    role       TEXT   NOT NULL,
    body       TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (session_pk, position),
    UNIQUE (session_pk, message_id)
);

-- submissions: durable submitMessages requests; seq orders them oldest first.
CREATE TABLE submissions (
    seq             BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              TEXT    NOT NULL UNIQUE,
    session_pk      BIGINT  NOT NULL REFERENCES sessions (pk) ON DELETE CASCADE,
    tenant          TEXT    NOT NULL,
    session_id      TEXT    NOT NULL,
    agent           TEXT    NOT NULL,
    idempotency_key TEXT,
    request         TEXT    NOT NULL,
    status          TEXT    NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'error', 'aborted', 'skipped')),
    result          TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL,
    UNIQUE (session_pk, idempotency_key)
);

-- submissions_open finds claimable and running work without scanning finished rows.
CREATE INDEX submissions_open ON submissions (status, seq) WHERE status IN ('queued', 'running');
CREATE INDEX submissions_session ON submissions (session_pk, seq);

-- turns: append-only audit of turn outcomes; not tied to sessions by a foreign
-- key so the audit outlives a deleted session.
CREATE TABLE turns (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id    TEXT   NOT NULL,
    tenant        TEXT   NOT NULL,
    session_id    TEXT   NOT NULL,
    agent         TEXT   NOT NULL,
    status        TEXT   NOT NULL,
    finish_reason TEXT   NOT NULL,
    error         TEXT   NOT NULL,
    usage         TEXT   NOT NULL,
    rule_revision TEXT   NOT NULL,
    started_at    BIGINT NOT NULL,
    finished_at   BIGINT NOT NULL
);

CREATE INDEX turns_session ON turns (tenant, session_id, seq);
