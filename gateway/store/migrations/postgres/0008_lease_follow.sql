-- 0008_lease_follow: a turn's stream is relayed only while a reader on
-- another replica follows it, and the lease's acquisition reads the
-- session's version for the transcript cache.

-- followed: a reader on another replica asked for the running turn's stream
-- (Relay.FollowStream). The holder then relays it through stream_chunks from
-- its first chunk, and releases the lease only after the last batch: a
-- release that finds the lease followed leaves it to the relay. An
-- acquisition clears it.
ALTER TABLE session_leases ADD COLUMN followed BOOLEAN NOT NULL DEFAULT false;

-- session_version is the session's stored version (NULL when there is
-- none), read with a snapshot of its own: VOLATILE, so called from the lease's
-- acquisition it sees what committed while the acquisition waited for the
-- lease row (a finish that released it, a fenced write of a holder whose
-- lease expired), which the acquisition's own snapshot predates.
CREATE FUNCTION session_version(p_tenant TEXT, p_id TEXT) RETURNS BIGINT
    LANGUAGE sql VOLATILE
    AS $$ SELECT version FROM sessions WHERE tenant = p_tenant AND id = p_id $$;
