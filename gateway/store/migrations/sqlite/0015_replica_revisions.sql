-- 0015_replica_revisions: PostgreSQL's table of each replica's live rules
-- revision. A SQLite file serves one process, whose revision the gateway
-- knows itself: nothing changes here (the version keeps both drivers'
-- numbers the same).
SELECT 1;
