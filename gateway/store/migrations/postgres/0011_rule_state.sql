-- 0011_rule_state: the events that declared rule state counts (policy/state,
-- gateway/rulestate), as in SQLite's 0011: one row per event and declaration
-- scope key, settled by event, pruned by expires_ms.
CREATE TABLE rule_state_events (
    id         BIGSERIAL PRIMARY KEY,
    state_key  TEXT             NOT NULL,
    at_ms      BIGINT           NOT NULL,
    event      TEXT             NOT NULL,
    outcome    TEXT             NOT NULL,
    value      DOUBLE PRECISION NOT NULL DEFAULT 0,
    item       TEXT             NOT NULL DEFAULT '',
    expires_ms BIGINT           NOT NULL
);
CREATE INDEX rule_state_events_key ON rule_state_events (state_key, at_ms);
CREATE INDEX rule_state_events_event ON rule_state_events (event);
CREATE INDEX rule_state_events_expiry ON rule_state_events (expires_ms);

-- turngate_state_admit reads the declared states of one event and records
-- the event, in one statement: one round trip per event. It first takes a
-- transaction-scoped advisory lock on every scope key it reads or writes
-- (p_locks, sorted by the caller so two events never wait on each other in
-- opposite orders), then reads each state (p_read_keys[i] from
-- p_read_from[i], counting the outcomes listed in p_read_outcomes[i], a
-- comma-separated list, '' for all), then inserts the event's rows. An
-- event of the same scope key on any replica waits for the lock, and its
-- read, a statement of its own taken after the lock, sees these rows: the
-- reads and counts of one scope key are serialised, and a value read
-- already counts every event admitted before.
CREATE FUNCTION turngate_state_admit(
    p_locks BIGINT[],
    p_read_keys TEXT[], p_read_from BIGINT[], p_read_outcomes TEXT[],
    p_event TEXT, p_at BIGINT, p_outcome TEXT,
    p_write_keys TEXT[], p_write_values DOUBLE PRECISION[], p_write_items TEXT[], p_write_expires BIGINT[])
    RETURNS TABLE (n BIGINT, total DOUBLE PRECISION, items BIGINT, last_ms BIGINT)
    LANGUAGE plpgsql
    AS $$
DECLARE
    k BIGINT;
BEGIN
    FOREACH k IN ARRAY coalesce(p_locks, '{}') LOOP
        PERFORM pg_advisory_xact_lock(k);
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_read_keys, 1), 0) LOOP
        RETURN QUERY SELECT count(*), coalesce(sum(e.value), 0)::DOUBLE PRECISION, count(DISTINCT e.item), max(e.at_ms)
            FROM rule_state_events e
            WHERE e.state_key = p_read_keys[i] AND e.at_ms >= p_read_from[i]
            AND (p_read_outcomes[i] = '' OR e.outcome = ANY (string_to_array(p_read_outcomes[i], ',')));
    END LOOP;
    INSERT INTO rule_state_events (state_key, at_ms, event, outcome, value, item, expires_ms)
        SELECT w.key, p_at, p_event, p_outcome, w.value, w.item, w.expires
        FROM unnest(p_write_keys, p_write_values, p_write_items, p_write_expires) AS w(key, value, item, expires);
END
$$;
