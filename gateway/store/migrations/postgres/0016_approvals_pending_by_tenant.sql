-- 0016_approvals_pending_by_tenant: turngate_approvals_pending counts each
-- tenant's pending approvals at every scrape (CountPendingApprovals); this
-- index covers that count without reading decided rows or the table
-- (state is in the key too: SQLite counts an index covering only if it
-- holds every column the query names).
CREATE INDEX approvals_pending_by_tenant ON approvals (tenant, state) WHERE state = 'pending';
