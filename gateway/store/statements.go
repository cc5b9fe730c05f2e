package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// statements are the SQLite store's SQL statements, each prepared once on
// the database that runs it instead of parsed on every call (parsing was 13%
// of the gateway's CPU under load). A statement of the reader pool is
// prepared on each read connection the first time it runs there; a writer
// statement runs inside a transaction through (*sql.Tx).StmtContext, which
// reuses the writer connection's prepared statement.
type statements struct {
	// On the readers.
	readSession, transcript, readSubmission, turns *sql.Stmt

	// On the writer.
	session, sessionPK, insertSession, touchSession, setLastBody *sql.Stmt
	admitSession, upsertMessage, appendMessage                   *sql.Stmt
	messagePosition, truncate                                    *sql.Stmt
	submissionByKey, insertSubmission, claimSubmission           *sql.Stmt
	submissionStatus, finishSubmission, requeue, recordTurn      *sql.Stmt
	renewSubmission, dropQueued, countQueue                      *sql.Stmt
	stateRead, stateAdd                                          *sql.Stmt

	// The writer's savepoint around each write of a batch (see write).
	savepoint, release, rollbackTo *sql.Stmt

	all []*sql.Stmt // every prepared statement, for close
}

// appendMessage inserts a message after the session's last one.
const appendMessage = `INSERT INTO messages (session_pk, position, message_id, role, body, created_at, updated_at)
	SELECT ?, COALESCE(MAX(position), 0) + 1, ?, ?, ?, ?, ? FROM messages WHERE session_pk = ?`

// selectSession reads a session by tenant and id.
const selectSession = `SELECT agent, last_body, created_at, updated_at FROM sessions WHERE tenant = ? AND id = ?`

// prepareStatements prepares the store's statements on the writer w and the
// readers r.
func prepareStatements(ctx context.Context, w, r *sql.DB) (*statements, error) {
	q := &statements{}
	for _, p := range []struct {
		db    *sql.DB
		dst   **sql.Stmt
		query string
	}{
		{r, &q.readSession, selectSession},
		// One statement, so the session and its transcript are one
		// snapshot: no session gives no rows, an empty transcript one row
		// with a NULL body.
		// message_id names a message in the transcript cache.
		{r, &q.transcript, `SELECT s.agent, s.last_body, s.created_at, s.updated_at, m.message_id, m.body
			FROM sessions s LEFT JOIN messages m ON m.session_pk = s.pk
			WHERE s.tenant = ? AND s.id = ? ORDER BY m.position`},
		{r, &q.readSubmission, `SELECT ` + submissionColumns + ` FROM submissions
			WHERE id = ? AND tenant = ? AND session_id = ?`},
		{r, &q.turns, `SELECT ` + turnColumns + ` FROM turns WHERE tenant = ? AND session_id = ? ORDER BY seq`},

		{w, &q.stateRead, sqliteStateRead},
		{w, &q.stateAdd, sqliteStateAdd},
		{w, &q.session, selectSession},
		{w, &q.sessionPK, `SELECT pk FROM sessions WHERE tenant = ? AND id = ?`},
		{w, &q.insertSession, `INSERT INTO sessions (tenant, id, agent, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO NOTHING`},
		{w, &q.touchSession, `UPDATE sessions SET updated_at = ? WHERE tenant = ? AND id = ? RETURNING pk`},
		{w, &q.setLastBody, `UPDATE sessions SET last_body = ?, updated_at = ? WHERE tenant = ? AND id = ?`},
		{w, &q.admitSession, `UPDATE sessions SET last_body = ?, updated_at = ?
			WHERE tenant = ? AND id = ? AND agent = ? RETURNING pk, created_at`},
		{w, &q.appendMessage, appendMessage},
		// A replaced message keeps its position and created_at.
		{w, &q.upsertMessage, appendMessage + ` ON CONFLICT (session_pk, message_id)
			DO UPDATE SET role = excluded.role, body = excluded.body, updated_at = excluded.updated_at`},
		{w, &q.messagePosition, `SELECT position FROM messages WHERE session_pk = ? AND message_id = ?`},
		{w, &q.truncate, `DELETE FROM messages WHERE session_pk = ? AND position >= ?`},
		{w, &q.submissionByKey, `SELECT ` + submissionColumns + ` FROM submissions
			WHERE session_pk = ? AND idempotency_key = ?`},
		{w, &q.insertSubmission, `INSERT INTO submissions
			(id, session_pk, tenant, session_id, agent, idempotency_key, request, status, attempts, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?) RETURNING ` + submissionColumns},
		// The oldest queued submission, or running one whose claim
		// expired, whose session has no earlier one queued or running.
		// The status IN (…) lets SQLite use submissions_open, the
		// partial index (a scan of every submission made the claims of
		// two processes on one file fail with SQLITE_BUSY).
		{w, &q.claimSubmission, `UPDATE submissions
			SET status = 'running', attempts = attempts + 1, updated_at = ?1, claimed_by = ?2, lease_until = ?1 + ?3
			WHERE seq = (
				SELECT q.seq FROM submissions q
				WHERE q.status IN ('queued', 'running') AND (q.status = 'queued' OR q.lease_until <= ?1) AND NOT EXISTS (
					SELECT 1 FROM submissions e
					WHERE e.session_pk = q.session_pk AND e.seq < q.seq AND e.status IN ('queued', 'running'))
				ORDER BY q.seq LIMIT 1)
			RETURNING ` + submissionColumns},
		{w, &q.renewSubmission, `UPDATE submissions SET lease_until = ? WHERE id = ? AND status = 'running' AND attempts = ?`},
		{w, &q.submissionStatus, `SELECT status FROM submissions WHERE id = ?`},
		// claim 0 finishes a queued submission; any other, the running
		// one of that claim.
		{w, &q.finishSubmission, `UPDATE submissions SET status = ?1, result = ?2, updated_at = ?3, lease_until = NULL
			WHERE id = ?4 AND ((status = 'queued' AND ?5 = 0) OR (status = 'running' AND attempts = ?5))`},
		{w, &q.requeue, `UPDATE submissions SET status = 'queued', updated_at = ?, claimed_by = NULL, lease_until = NULL
			WHERE status = 'running'`},
		{w, &q.dropQueued, `UPDATE submissions SET status = 'aborted', result = ?, updated_at = ?
			WHERE tenant = ? AND session_id = ? AND status = 'queued'`},
		{w, &q.countQueue, `SELECT COALESCE(SUM(session_pk = ?1), 0), COUNT(*) FROM submissions
			WHERE tenant = ?2 AND status = 'queued'`},
		// A record already stored for the same turn (a retried write whose
		// first attempt's outcome was unknown) is not stored again: a turn
		// is its request id and start, which a re-run of a submission does
		// not share.
		{w, &q.recordTurn, `INSERT INTO turns (request_id, tenant, session_id, agent, status, finish_reason,
			error, usage, rule_revision, started_at, finished_at)
			SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
			WHERE NOT EXISTS (SELECT 1 FROM turns WHERE tenant = ?2 AND session_id = ?3 AND request_id = ?1 AND started_at = ?10)`},
		{w, &q.savepoint, `SAVEPOINT write`},
		{w, &q.release, `RELEASE write`},
		{w, &q.rollbackTo, `ROLLBACK TO write`},
	} {
		stmt, err := p.db.PrepareContext(ctx, p.query)
		if err != nil {
			head, _, _ := strings.Cut(p.query, "\n")
			return nil, errors.Join(fmt.Errorf("preparing %q: %w", head, err), q.close())
		}
		*p.dst = stmt
		q.all = append(q.all, stmt)
	}
	return q, nil
}

// close closes every prepared statement.
func (q *statements) close() error {
	var errs []error
	for _, stmt := range q.all {
		errs = append(errs, stmt.Close())
	}
	return errors.Join(errs...)
}
