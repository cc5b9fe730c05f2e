-- 0012_rule_state_buckets: replaces 0011's row per event (rule_state_events)
-- with counts aggregated per bucket, so a hot key's read stays small; the
-- events of 0011 are dropped (a declared state restarts from zero once).
-- IF EXISTS / IF NOT EXISTS / OR REPLACE: a database that ran the bucket
-- version of 0011 briefly on main (2026-12-02, 07:11-07:20) migrates too.
DROP TABLE IF EXISTS rule_state_events;
-- The counts of declared rule state (policy/state,
-- gateway/rulestate), aggregated per scope key, time bucket, outcome and
-- item. state_key is a hash of the declaration's fingerprint and the
-- event's scope values; bucket_ms the start of the event's bucket (the
-- declaration's resolution, a minute for calendar windows), so a window,
-- whose start is a bucket boundary, is a range of buckets. n counts the
-- events, total sums their amounts (tokens, an input field), last_ms is
-- the newest one's time, item the distinct value (countDistinct, else '').
-- An event is counted under its tentative outcome and moved to its final
-- one (n - 1 there, n + 1 here) when the rules decided. expires_ms is when
-- no window of the declaration holds the bucket any more: pruning deletes
-- below it in batches. A hot key is a few rows per bucket, not a row per
-- event, so a read stays small however busy the key.
CREATE TABLE IF NOT EXISTS rule_state_buckets (
    state_key  TEXT    NOT NULL,
    bucket_ms  INTEGER NOT NULL,
    outcome    TEXT    NOT NULL,
    item       TEXT    NOT NULL,
    n          INTEGER NOT NULL,
    total      REAL    NOT NULL,
    last_ms    INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (state_key, bucket_ms, outcome, item)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS rule_state_buckets_expiry ON rule_state_buckets (expires_ms);
