-- 0014_session_indexes: the indexes of the session records (gateway/erasure).
-- GET /v1/agents/{agent}/sessions pages a tenant's sessions of an agent by
-- id; retention reads the sessions last written before a time, least
-- recently written first.
CREATE INDEX sessions_by_agent ON sessions (tenant, agent, id);
CREATE INDEX sessions_by_updated ON sessions (updated_at);
