-- 0004_session_context: as migrations/sqlite/0004_session_context.sql has it.
-- through_message_id is bytes, as messages.message_id.

CREATE TABLE context_blocks (
    tenant     TEXT   NOT NULL,
    session_id TEXT   NOT NULL,
    name       TEXT   NOT NULL,
    content    TEXT   NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, session_id, name)
);

CREATE TABLE compactions (
    seq                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant             TEXT   NOT NULL,
    session_id         TEXT   NOT NULL,
    through_message_id BYTEA  NOT NULL,
    message_count      BIGINT NOT NULL,
    summary            TEXT   NOT NULL,
    reason             TEXT   NOT NULL,
    input_tokens       BIGINT NOT NULL,
    model              TEXT   NOT NULL,
    created_at         BIGINT NOT NULL
);

CREATE INDEX compactions_session ON compactions (tenant, session_id, seq);

CREATE TABLE session_usage (
    tenant            TEXT   NOT NULL,
    session_id        TEXT   NOT NULL,
    last_input_tokens BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    PRIMARY KEY (tenant, session_id)
);
