-- 0006_replicas: the lease of a running submission (see
-- migrations/postgres/0006_replicas.sql). A SQLite file serves one process:
-- its session leases live in the process, and it relays no streams.
ALTER TABLE submissions ADD COLUMN claimed_by TEXT;
ALTER TABLE submissions ADD COLUMN lease_until INTEGER;

-- submissions_queued counts a tenant's queued submissions for the queue limits.
CREATE INDEX submissions_queued ON submissions (tenant, session_pk) WHERE status = 'queued';

-- A submission left running by a binary without claims is taken over at once.
UPDATE submissions SET lease_until = 0 WHERE status = 'running';
