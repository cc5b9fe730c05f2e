-- 0002_approvals: tool calls held for a person's approval (the Rego approval
-- decision). A row is pending until decided once: approved, denied or expired.

CREATE TABLE approvals (
    id           TEXT    NOT NULL PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    session_id   TEXT    NOT NULL,
    agent        TEXT    NOT NULL,
    request_id   TEXT    NOT NULL,
    message_id   TEXT    NOT NULL,
    tool_call_id TEXT    NOT NULL,
    tool_name    TEXT    NOT NULL,
    input        TEXT    NOT NULL,
    reasons      TEXT    NOT NULL,
    approvers    TEXT    NOT NULL,
    principal    TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
    decided_by   TEXT    NOT NULL DEFAULT '',
    reason       TEXT    NOT NULL DEFAULT '',
    requested_at INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decided_at   INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX approvals_session ON approvals (tenant, session_id, requested_at);
-- approvals_pending finds what expires without scanning decided rows.
CREATE INDEX approvals_pending ON approvals (expires_at) WHERE state = 'pending';
