-- 0008_lease_follow: nothing on SQLite (see
-- migrations/postgres/0008_lease_follow.sql): a SQLite file serves one
-- process, whose session leases live in memory and which relays no streams.
SELECT 1;
