-- 0003_tool_journal: the results of executed tool calls, journaled before the
-- turn's next model step so a re-run of the turn (a submission requeued after
-- a crash) reuses them instead of calling the tool again. A result is named by
-- the turn's request id (a submission's re-runs share it) and the model's tool
-- call id, or else by its position in the turn (step, call_index): a re-run's
-- model may name the same call anew. tool_name and input_sha256 (hex SHA-256
-- of the effective input) let a re-run tell a repeated call from another one.
-- Not tied to sessions by a foreign key, as turns are not.
CREATE TABLE tool_results (
    tenant       TEXT    NOT NULL,
    session_id   TEXT    NOT NULL,
    request_id   TEXT    NOT NULL,
    tool_call_id TEXT    NOT NULL,
    tool_name    TEXT    NOT NULL,
    input_sha256 TEXT    NOT NULL,
    output       TEXT,
    error        TEXT    NOT NULL,
    step         INTEGER NOT NULL,
    call_index   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant, session_id, request_id, tool_call_id)
) WITHOUT ROWID;
