-- 0004_session_context: what an agent's session configuration keeps per session:
-- the writable context blocks the model updates, the compaction summaries with
-- the range of messages each replaces, and the last step's reported input tokens
-- (the compaction threshold's measure). Keyed by (tenant, session_id) like turns.

CREATE TABLE context_blocks (
    tenant     TEXT    NOT NULL,
    session_id TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    content    TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, name)
) WITHOUT ROWID;

-- compactions: append-only; the latest whose through_message_id is still in the
-- transcript is the one in force. message_count is how many messages, from the
-- transcript's start, the summary replaces.
CREATE TABLE compactions (
    seq                INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant             TEXT    NOT NULL,
    session_id         TEXT    NOT NULL,
    through_message_id TEXT    NOT NULL,
    message_count      INTEGER NOT NULL,
    summary            TEXT    NOT NULL,
    reason             TEXT    NOT NULL,
    input_tokens       INTEGER NOT NULL,
    model              TEXT    NOT NULL,
    created_at         INTEGER NOT NULL
);

CREATE INDEX compactions_session ON compactions (tenant, session_id, seq);

CREATE TABLE session_usage (
    tenant            TEXT    NOT NULL,
    session_id        TEXT    NOT NULL,
    last_input_tokens INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id)
) WITHOUT ROWID;
