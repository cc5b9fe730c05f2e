-- 0012_rule_state_buckets: replaces 0011's row per event (rule_state_events)
-- and its turngate_state_admit with counts aggregated per bucket, as in
-- SQLite's 0012; the events of 0011 are dropped (a declared state restarts
-- from zero once).
-- IF EXISTS / IF NOT EXISTS / OR REPLACE: a database that ran the bucket
-- version of 0011 briefly on main (2026-12-02, 07:11-07:20) migrates too.
DROP FUNCTION IF EXISTS turngate_state_admit(BIGINT[], TEXT[], BIGINT[], TEXT[], TEXT, BIGINT, TEXT, TEXT[], DOUBLE PRECISION[], TEXT[], BIGINT[]);
DROP TABLE IF EXISTS rule_state_events;
-- The counts of declared rule state (policy/state,
-- gateway/rulestate), as in SQLite's 0012: aggregated per scope key, time
-- bucket, outcome and item; an event counted under its tentative outcome
-- and moved to its final one when the rules decided; pruned by expires_ms.
CREATE TABLE IF NOT EXISTS rule_state_buckets (
    state_key  TEXT             NOT NULL,
    bucket_ms  BIGINT           NOT NULL,
    outcome    TEXT             NOT NULL,
    item       TEXT             NOT NULL,
    n          BIGINT           NOT NULL,
    total      DOUBLE PRECISION NOT NULL,
    last_ms    BIGINT           NOT NULL,
    expires_ms BIGINT           NOT NULL,
    PRIMARY KEY (state_key, bucket_ms, outcome, item)
);
CREATE INDEX IF NOT EXISTS rule_state_buckets_expiry ON rule_state_buckets (expires_ms);

-- turngate_state_add adds p_n events (-1 to take one back) to each row
-- p_keys[i], p_buckets[i], p_outcome, p_items[i], with the amounts
-- p_values[i] (their sign follows p_n), at p_at.
CREATE OR REPLACE FUNCTION turngate_state_add(p_keys TEXT[], p_buckets BIGINT[], p_items TEXT[], p_values DOUBLE PRECISION[],
    p_expires BIGINT[], p_outcome TEXT, p_at BIGINT, p_n BIGINT) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    INSERT INTO rule_state_buckets AS b (state_key, bucket_ms, outcome, item, n, total, last_ms, expires_ms)
        SELECT w.key, w.bucket, p_outcome, w.item, p_n, p_n * w.value, p_at, w.expires
        FROM unnest(p_keys, p_buckets, p_items, p_values, p_expires) AS w(key, bucket, item, value, expires)
    ON CONFLICT (state_key, bucket_ms, outcome, item) DO UPDATE
        SET n = b.n + excluded.n, total = b.total + excluded.total,
            last_ms = GREATEST(b.last_ms, excluded.last_ms), expires_ms = GREATEST(b.expires_ms, excluded.expires_ms);
END
$$;

-- turngate_state_admit reads the declared states of one event and counts
-- the event, in one statement: one round trip per event. It first takes a
-- transaction-scoped advisory lock on every scope key it reads or writes
-- (p_locks, sorted by the caller so two events never wait on each other in
-- opposite orders), then reads each state (p_read_keys[i] from the bucket
-- p_read_from[i] on, counting the outcomes listed in p_read_outcomes[i], a
-- comma-separated list, '' for all), then counts the event. An event of the
-- same scope key on any replica waits for the lock, and its read, a
-- statement of its own taken after the lock, sees this count: the reads and
-- counts of one scope key are serialised, and a value read already counts
-- every event admitted before.
CREATE OR REPLACE FUNCTION turngate_state_admit(
    p_locks BIGINT[],
    p_read_keys TEXT[], p_read_from BIGINT[], p_read_outcomes TEXT[],
    p_at BIGINT, p_outcome TEXT,
    p_write_keys TEXT[], p_write_buckets BIGINT[], p_write_items TEXT[], p_write_values DOUBLE PRECISION[], p_write_expires BIGINT[])
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
        RETURN QUERY SELECT coalesce(sum(b.n), 0)::BIGINT, coalesce(sum(b.total), 0)::DOUBLE PRECISION, count(DISTINCT b.item), max(b.last_ms)
            FROM rule_state_buckets b
            WHERE b.state_key = p_read_keys[i] AND b.bucket_ms >= p_read_from[i] AND b.n > 0
            AND (p_read_outcomes[i] = '' OR b.outcome = ANY (string_to_array(p_read_outcomes[i], ',')));
    END LOOP;
    IF coalesce(array_length(p_write_keys, 1), 0) > 0 THEN
        PERFORM turngate_state_add(p_write_keys, p_write_buckets, p_write_items, p_write_values, p_write_expires, p_outcome, p_at, 1);
    END IF;
END
$$;

-- turngate_state_settle moves one event from outcome p_from to p_to in
-- each of its rows: one round trip.
CREATE OR REPLACE FUNCTION turngate_state_settle(p_keys TEXT[], p_buckets BIGINT[], p_items TEXT[], p_values DOUBLE PRECISION[],
    p_expires BIGINT[], p_from TEXT, p_to TEXT, p_at BIGINT) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM turngate_state_add(p_keys, p_buckets, p_items, p_values, p_expires, p_from, p_at, -1);
    PERFORM turngate_state_add(p_keys, p_buckets, p_items, p_values, p_expires, p_to, p_at, 1);
END
$$;
