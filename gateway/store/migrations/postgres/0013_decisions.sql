-- 0013_decisions: the queryable decision store (gateway/decisions), as in
-- SQLite's 0013. Every hook's audit record (the four decision hooks'
-- decision records and the observation hooks' records) is kept here too,
-- beside the JSONL audit log, for GET /v1/admin/decisions;
-- decisions.retention prunes it.

-- decisions holds one row per record: the columns the admin API filters
-- on, and record, the record's JSONL audit line as the audit log wrote it.
-- id is the order the records were written in (a turn's execution order);
-- at is the record's time in Unix nanoseconds; step is NULL for a record
-- of no step; shadow_changed is true when the shadow rules would have
-- decided otherwise; rules_fired is the JSON array of the rules that fired.
CREATE TABLE decisions (
    id             BIGSERIAL PRIMARY KEY,
    at             BIGINT  NOT NULL,
    tenant         TEXT    NOT NULL,
    agent          TEXT    NOT NULL,
    session_id     TEXT    NOT NULL,
    request_id     TEXT    NOT NULL,
    hook           TEXT    NOT NULL,
    tool           TEXT    NOT NULL,
    tool_call_id   TEXT    NOT NULL,
    step           BIGINT,
    outcome        TEXT    NOT NULL,
    action         TEXT    NOT NULL,
    revision       TEXT    NOT NULL,
    shadow_changed BOOLEAN NOT NULL,
    rules_fired    TEXT    NOT NULL,
    record         TEXT    NOT NULL
);
-- Each filter has an index ending in (at, id), the order of a page, so a
-- filtered page reads its rows in order and stops at the page's end.
CREATE INDEX decisions_at ON decisions (at, id);
CREATE INDEX decisions_tenant ON decisions (tenant, at, id);
CREATE INDEX decisions_agent ON decisions (agent, at, id);
CREATE INDEX decisions_session ON decisions (session_id, at, id);
CREATE INDEX decisions_request ON decisions (request_id, at, id);
CREATE INDEX decisions_hook ON decisions (hook, at, id);
CREATE INDEX decisions_tool ON decisions (tool, at, id);
CREATE INDEX decisions_outcome ON decisions (outcome, at, id);
CREATE INDEX decisions_action ON decisions (action, at, id);
CREATE INDEX decisions_revision ON decisions (revision, at, id);
CREATE INDEX decisions_shadow_changed ON decisions (at, id) WHERE shadow_changed;

-- decision_rules indexes the rules that fired: one row per rule of a
-- decision, with the decision's time, so a rule's page is read in order.
CREATE TABLE decision_rules (
    rule        TEXT    NOT NULL,
    at          BIGINT  NOT NULL,
    decision_id BIGINT  NOT NULL,
    PRIMARY KEY (rule, at, decision_id)
);
CREATE INDEX decision_rules_at ON decision_rules (at);
