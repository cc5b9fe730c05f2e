-- 0010_kill_switches: the operators' kill switches (gateway/killswitch).

-- kill_switches holds the switches in force: each stops the tool calls it
-- names (block 'tools': tools is a JSON array of names and patterns, empty
-- for every tool) or every turn (block 'turns') of its scope, tenant and
-- agent ('' for all), until it is lifted (the row is deleted) or until
-- expires_at (0: no expiry). Every replica reads the whole table, which a
-- write announces on the turngate_killswitch channel.
CREATE TABLE kill_switches (
    id         TEXT    PRIMARY KEY,
    block      TEXT    NOT NULL CHECK (block IN ('tools', 'turns')),
    tools      TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    agent      TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    created_by TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL
);
