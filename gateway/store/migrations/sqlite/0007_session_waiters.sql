-- 0007_session_waiters: nothing on SQLite. Its file serves one process,
-- whose in-process lock queues the requests waiting for a session (see
-- migrations/postgres/0007_session_waiters.sql).
SELECT 1;
