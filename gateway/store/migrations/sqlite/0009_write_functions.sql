-- 0009_write_functions: nothing on SQLite (see
-- migrations/postgres/0009_write_functions.sql): its writes are calls into
-- the same process, with no round trips to save.
SELECT 1;
