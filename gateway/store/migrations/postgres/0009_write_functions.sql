-- 0009_write_functions: the writes of a chat turn as PL/pgSQL functions, so
-- the store sends each as one statement that PostgreSQL commits on its own:
-- one round trip instead of a transaction of five or six (BEGIN, the lease's
-- fence, the session, the message, the turn record, COMMIT). They are the
-- admission of a turn (turngate_admit) and the append or replacement of a
-- message, with the turn's record and the release of its lease when it
-- finishes the turn (turngate_put_message, called from the store's
-- statement that also records the turn). PL/pgSQL keeps each function's
-- plans for its connection.
--
-- A refused write raises, and the statement stores nothing: SQLSTATE TG001
-- when the lease it was made under (p_token) is no longer the session's
-- (fenced out: another acquisition moved the token), TG002 when the session
-- is not found, and the messages table's unique_violation (23505) when the
-- message id is already in the session. The store maps them to ErrFenced,
-- ErrNotFound and ErrConflict.

-- session_version (0008) as PL/pgSQL: VOLATILE, so its statement still runs
-- with a snapshot of its own, taken at the call; its plan is kept, where the
-- SQL function planned its query at every call.
CREATE OR REPLACE FUNCTION session_version(p_tenant TEXT, p_id TEXT) RETURNS BIGINT
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN (SELECT version FROM sessions WHERE tenant = p_tenant AND id = p_id);
END
$$;

-- session_waiting reports whether the session has live waiters for its
-- lease (session_waiters, 0007), with a snapshot of its own, taken at the
-- call: a release calls it once it holds the lease row, so it sees every
-- waiter registered before the lease row was locked. With the statement's
-- snapshot instead, a waiter that registered between the snapshot and the
-- lock, and whose acquisition failed on the lease still held, would not be
-- woken (it would start on its poll).
CREATE FUNCTION session_waiting(p_tenant TEXT, p_id TEXT) RETURNS BOOLEAN
    LANGUAGE plpgsql VOLATILE
    AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM session_waiters w
        WHERE w.tenant = p_tenant AND w.session_id = p_id
        AND w.expires_at > (EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000)::BIGINT);
END
$$;

-- turngate_fence holds the session's lease row of token p_token (shared)
-- until the calling statement's transaction ends, as the store's pgFence
-- does: an acquisition, which moves the token, waits for the write to
-- commit, and a write after it raises TG001. A NULL p_token (a write made
-- under no lease) is not fenced.
CREATE FUNCTION turngate_fence(p_tenant TEXT, p_id TEXT, p_token BIGINT) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_token IS NULL THEN
        RETURN;
    END IF;
    PERFORM FROM session_leases WHERE tenant = p_tenant AND session_id = p_id AND token = p_token FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fenced out: lease % of the session is no longer its current one', p_token USING ERRCODE = 'TG001';
    END IF;
END
$$;

-- turngate_insert_message appends a message to the session with key p_pk
-- after its last one; with p_replace, a message with its id already there is
-- replaced in place instead, keeping its position and created_at.
CREATE FUNCTION turngate_insert_message(p_pk BIGINT, p_message_id BYTEA, p_role TEXT, p_body TEXT, p_t BIGINT,
    p_replace BOOLEAN) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF p_replace THEN
        INSERT INTO messages (session_pk, position, message_id, role, body, created_at, updated_at)
        SELECT p_pk, COALESCE(MAX(m.position), 0) + 1, p_message_id, p_role, p_body, p_t, p_t
        FROM messages m WHERE m.session_pk = p_pk
        ON CONFLICT (session_pk, message_id)
        DO UPDATE SET role = excluded.role, body = excluded.body, updated_at = excluded.updated_at;
    ELSE
        INSERT INTO messages (session_pk, position, message_id, role, body, created_at, updated_at)
        SELECT p_pk, COALESCE(MAX(m.position), 0) + 1, p_message_id, p_role, p_body, p_t, p_t
        FROM messages m WHERE m.session_pk = p_pk;
    END IF;
END
$$;

-- turngate_admit admits a turn at time p_t: it sets the last body of the
-- tenant's session of agent p_agent and bumps its version, creating the
-- session when there is none, and appends the user message when
-- p_message_id is not NULL. It returns the session's version after the
-- write and whether it created the session. When the session belongs to
-- another agent it writes nothing and returns that session's columns with
-- a NULL o_version.
CREATE FUNCTION turngate_admit(p_tenant TEXT, p_id TEXT, p_agent TEXT, p_token BIGINT, p_last_body TEXT, p_t BIGINT,
    p_message_id BYTEA, p_role TEXT, p_body TEXT,
    OUT o_agent TEXT, OUT o_last_body TEXT, OUT o_created_at BIGINT, OUT o_updated_at BIGINT,
    OUT o_version BIGINT, OUT o_created BOOLEAN)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_pk BIGINT;
BEGIN
    PERFORM turngate_fence(p_tenant, p_id, p_token);
    o_created := false;
    -- An existing session of the agent, the common case: one statement
    -- sets its last body, bumps (and locks) it and returns it.
    UPDATE sessions s SET last_body = p_last_body, updated_at = p_t, version = s.version + 1
    WHERE s.tenant = p_tenant AND s.id = p_id AND s.agent = p_agent
    RETURNING s.pk, s.created_at, s.version INTO v_pk, o_created_at, o_version;
    IF NOT FOUND THEN
        -- Absent (create it) or another agent's (write nothing). A
        -- concurrent creation makes the insert wait for it, then do
        -- nothing; the select, with a snapshot of its own, then sees it.
        INSERT INTO sessions (tenant, id, agent, created_at, updated_at, version)
        VALUES (p_tenant, p_id, p_agent, p_t, p_t, 1)
        ON CONFLICT (tenant, id) DO NOTHING;
        o_created := FOUND;
        SELECT s.pk, s.agent, s.last_body, s.created_at, s.updated_at
        INTO v_pk, o_agent, o_last_body, o_created_at, o_updated_at
        FROM sessions s WHERE s.tenant = p_tenant AND s.id = p_id;
        IF o_agent <> p_agent THEN
            RETURN;
        END IF;
        UPDATE sessions s SET last_body = p_last_body, updated_at = p_t, version = s.version + 1
        WHERE s.pk = v_pk RETURNING s.version INTO o_version;
    END IF;
    o_agent := p_agent;
    o_last_body := p_last_body;
    o_updated_at := p_t;
    IF p_message_id IS NOT NULL THEN
        PERFORM turngate_insert_message(v_pk, p_message_id, p_role, p_body, p_t, false);
    END IF;
END
$$;

-- turngate_put_message appends the message to the tenant's session at time
-- p_t, or with p_replace replaces the message with its id in place, bumping
-- the session's version, which it returns. With p_release it also releases
-- the lease p_token, unless a reader on another replica follows its stream
-- (the relay then releases it after the stream's last batch), and wakes the
-- session's waiters when it did (notifying p_channel with p_payload at the
-- commit); o_released reports whether it released it.
CREATE FUNCTION turngate_put_message(p_tenant TEXT, p_id TEXT, p_token BIGINT, p_release BOOLEAN,
    p_channel TEXT, p_payload TEXT, p_t BIGINT, p_message_id BYTEA, p_role TEXT, p_body TEXT, p_replace BOOLEAN,
    OUT o_version BIGINT, OUT o_released BOOLEAN)
    LANGUAGE plpgsql
    AS $$
DECLARE
    v_pk BIGINT;
BEGIN
    o_released := false;
    IF p_release THEN
        -- The fence, holding the lease row (exclusive) until the commit.
        UPDATE session_leases l SET expires_at = CASE WHEN l.followed THEN l.expires_at ELSE 0 END
        WHERE l.tenant = p_tenant AND l.session_id = p_id AND l.token = p_token
        RETURNING NOT l.followed INTO o_released;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'fenced out: lease % of the session is no longer its current one', p_token USING ERRCODE = 'TG001';
        END IF;
        IF o_released AND session_waiting(p_tenant, p_id) THEN
            PERFORM pg_notify(p_channel, p_payload);
        END IF;
    ELSE
        PERFORM turngate_fence(p_tenant, p_id, p_token);
    END IF;
    UPDATE sessions s SET updated_at = p_t, version = s.version + 1
    WHERE s.tenant = p_tenant AND s.id = p_id
    RETURNING s.pk, s.version INTO v_pk, o_version;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'session not found' USING ERRCODE = 'TG002';
    END IF;
    PERFORM turngate_insert_message(v_pk, p_message_id, p_role, p_body, p_t, p_replace);
END
$$;
