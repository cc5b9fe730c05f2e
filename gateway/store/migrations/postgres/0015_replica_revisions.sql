-- 0015_replica_revisions: each replica's live rules revision (gateway
-- replicas, GET /v1/admin/rules): the replica writes its row when it
-- starts, on every reload and every half minute, so the Overview lists
-- every replica of the shared store and how long ago each reported.
CREATE TABLE replica_revisions (
    replica     TEXT   PRIMARY KEY,
    revision    TEXT   NOT NULL,
    files       JSONB  NOT NULL,
    reported_at BIGINT NOT NULL
);
