-- 0011_rule_state: the events that declared rule state counts (policy/state,
-- gateway/rulestate). One row per event and declaration scope key
-- (state_key, a hash of the declaration's fingerprint and the event's scope
-- values): a read of one state for one event is a range over
-- (state_key, at_ms). event names the gateway's event (one admission) so
-- its outcome can be settled after the rules decided (executed → blocked,
-- succeeded, …). value is the summed amount (tokens, an input field), item
-- the distinct value (countDistinct). expires_ms is when no window of the
-- declaration holds the row any more: pruning deletes below it in batches.
CREATE TABLE rule_state_events (
    id         INTEGER PRIMARY KEY,
    state_key  TEXT    NOT NULL,
    at_ms      INTEGER NOT NULL,
    event      TEXT    NOT NULL,
    outcome    TEXT    NOT NULL,
    value      REAL    NOT NULL DEFAULT 0,
    item       TEXT    NOT NULL DEFAULT '',
    expires_ms INTEGER NOT NULL
);
CREATE INDEX rule_state_events_key ON rule_state_events (state_key, at_ms);
CREATE INDEX rule_state_events_event ON rule_state_events (event);
CREATE INDEX rule_state_events_expiry ON rule_state_events (expires_ms);
