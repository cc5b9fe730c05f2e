package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Decisions keeps every hook's audit record for querying (the decision
// store, gateway/decisions): the JSONL audit log stays the record of
// truth, this is its index. Both drivers implement it with the same
// statements.
type Decisions interface {
	// InsertDecisions stores rows, in order, as one write: on SQLite one
	// request of the writer's group commit, on PostgreSQL one statement.
	// Each row's ID is set to the id it was stored under, increasing in
	// the order of rows.
	InsertDecisions(ctx context.Context, rows []DecisionRow) error
	// QueryDecisions returns the rows q selects, in q's order.
	QueryDecisions(ctx context.Context, q DecisionQuery) ([]DecisionRow, error)
	// GetDecision returns the row id, of any tenant (the caller checks
	// the tenant), or ErrNotFound.
	GetDecision(ctx context.Context, id int64) (*DecisionRow, error)
	// PruneDecisions deletes at most limit rows older than before, the
	// oldest first, and returns how many it deleted.
	PruneDecisions(ctx context.Context, before time.Time, limit int) (int, error)
	// CountShadowChanged counts the rows stored at or after since whose
	// shadow rules would have decided otherwise (ShadowChanged), of
	// tenant, or of every tenant when tenant is "". It reads an index
	// (decisions_tenant, or decisions_shadow_changed), never the rows'
	// records.
	CountShadowChanged(ctx context.Context, tenant string, since time.Time) (int64, error)
	// EraseDecisions deletes the tenant's session's rows (EraseSession
	// does too); deleting none is no error.
	EraseDecisions(ctx context.Context, tenant, sessionID string) error
}

// DecisionRow is one stored hook record.
type DecisionRow struct {
	// ID is the store's id, given by InsertDecisions.
	ID         int64
	Time       time.Time
	Tenant     string
	Agent      string
	SessionID  string
	RequestID  string
	Hook       string
	Tool       string
	ToolCallID string
	// Step is the step number, nil for a record of no step.
	Step *int
	// Outcome is the record's outcome (policy.Outcome*; "" for an
	// observation hook's record).
	Outcome string
	// Action is what became of the tool call: a beforeToolCall's action,
	// an afterToolCall's decision; "" for the other hooks.
	Action        string
	Revision      string
	ShadowChanged bool
	RulesFired    []string
	// Record is the record's audit line, without its newline.
	Record json.RawMessage
}

// DecisionQuery selects decision rows. Its empty fields select every row.
type DecisionQuery struct {
	Tenant, Agent, SessionID, RequestID, Hook, Tool string
	Outcome, Action, Revision                       string
	// Rule selects the rows whose rule Rule fired.
	Rule string
	// ShadowChanged, when not nil, selects the rows whose shadow changed
	// flag is *ShadowChanged.
	ShadowChanged *bool
	// Since (inclusive) and Until (exclusive) bound the rows' time; zero:
	// unbounded.
	Since, Until time.Time
	// After, when not nil, starts after that row in the query's order
	// (keyset paging: rows stored meanwhile never shift a page).
	After *DecisionKey
	// Ascending orders the rows oldest first (by time, then id); else
	// newest first.
	Ascending bool
	// Limit bounds the rows returned (required, at most MaxDecisionPage).
	Limit int
}

// MaxDecisionPage bounds DecisionQuery.Limit.
const MaxDecisionPage = 1000

// DecisionKey is a row's place in the order of a query: its time and id.
type DecisionKey struct {
	Time time.Time
	ID   int64
}

// Key returns r's place in the order of a query.
func (r *DecisionRow) Key() DecisionKey { return DecisionKey{Time: r.Time, ID: r.ID} }

// ruleSeparator joins the rules of a row for PostgreSQL's insert; a rule
// holding it is left out of decision_rules (its record still names it).
const ruleSeparator = "\x1f"

const decisionColumns = `d.id, d.at, d.tenant, d.agent, d.session_id, d.request_id, d.hook, d.tool,
	d.tool_call_id, d.step, d.outcome, d.action, d.revision, d.shadow_changed, d.rules_fired, d.record`

const (
	insertDecisionSQL = `INSERT INTO decisions (at, tenant, agent, session_id, request_id, hook, tool, tool_call_id,
		step, outcome, action, revision, shadow_changed, rules_fired, record)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertDecisionRuleSQL = `INSERT OR IGNORE INTO decision_rules (rule, at, decision_id) VALUES (?, ?, ?)`
	getDecisionSQL        = `SELECT ` + decisionColumns + ` FROM decisions d WHERE d.id = ?`
	// The prunes delete the oldest rows first, a bounded number at a
	// time: the writer (SQLite) or the table (PostgreSQL) is never held
	// for long.
	pruneDecisionsSQL = `DELETE FROM decisions WHERE id IN
		(SELECT id FROM decisions WHERE at < ? ORDER BY at LIMIT ?)`
	pruneDecisionRulesSQL = `DELETE FROM decision_rules WHERE (rule, at, decision_id) IN
		(SELECT rule, at, decision_id FROM decision_rules WHERE at < ? ORDER BY at LIMIT ?)`
)

// pgInsertDecisions inserts a whole batch in one statement: the columns
// come as arrays, ids are drawn in the rows' order, and the rules, joined
// by ruleSeparator, go to decision_rules in the same statement.
const pgInsertDecisions = `WITH input AS (
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::bigint[], $10::text[], $11::text[], $12::text[], $13::boolean[], $14::text[], $15::text[], $16::text[])
			WITH ORDINALITY AS u(at, tenant, agent, session_id, request_id, hook, tool, tool_call_id,
				step, outcome, action, revision, shadow_changed, rules_fired, record, rules, ord)
		ORDER BY ord
	), numbered AS (
		SELECT nextval(pg_get_serial_sequence('decisions', 'id')) AS id, input.* FROM input
	), stored AS (
		INSERT INTO decisions (id, at, tenant, agent, session_id, request_id, hook, tool, tool_call_id,
			step, outcome, action, revision, shadow_changed, rules_fired, record)
		SELECT id, at, tenant, agent, session_id, request_id, hook, tool, tool_call_id,
			step, outcome, action, revision, shadow_changed, rules_fired, record FROM numbered
	), ruled AS (
		INSERT INTO decision_rules (rule, at, decision_id)
		SELECT DISTINCT r.rule, n.at, n.id FROM numbered n, unnest(string_to_array(n.rules, E'\x1f')) AS r(rule)
		WHERE n.rules <> ''
	)
	SELECT id FROM numbered ORDER BY ord`

// decisionArgs checks row and returns its column values, as insertDecisionSQL
// takes them (shadow_changed a bool) and its rules JSON.
func decisionArgs(row *DecisionRow) ([]any, error) {
	for name, s := range map[string]string{"tenant": row.Tenant, "agent": row.Agent, "session id": row.SessionID,
		"request id": row.RequestID, "hook": row.Hook, "tool": row.Tool, "tool call id": row.ToolCallID,
		"outcome": row.Outcome, "action": row.Action, "revision": row.Revision} {
		if err := storableText(name, s); err != nil {
			return nil, err
		}
	}
	if row.Hook == "" || row.Time.IsZero() {
		return nil, fmt.Errorf("%w: a decision row needs a hook and a time", ErrInvalid)
	}
	if !json.Valid(row.Record) || strings.ContainsRune(string(row.Record), 0) {
		return nil, fmt.Errorf("%w: a decision row's record is not JSON", ErrInvalid)
	}
	rules := row.RulesFired
	if rules == nil {
		rules = []string{}
	}
	for _, r := range rules {
		if err := storableText("rule", r); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(rules)
	if err != nil {
		return nil, fmt.Errorf("%w: rules: %v", ErrInvalid, err)
	}
	var step any
	if row.Step != nil {
		step = int64(*row.Step)
	}
	return []any{nanos(row.Time), row.Tenant, row.Agent, row.SessionID, row.RequestID, row.Hook, row.Tool, row.ToolCallID,
		step, row.Outcome, row.Action, row.Revision, row.ShadowChanged, string(raw), string(row.Record)}, nil
}

// indexedRules returns the rules of row that go to decision_rules: each
// once, none holding ruleSeparator.
func indexedRules(row *DecisionRow) []string {
	var out []string
	for _, r := range row.RulesFired {
		if r != "" && !strings.Contains(r, ruleSeparator) && !containsString(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// decisionSelect renders q as a statement with ? placeholders and its
// arguments; pg renders PostgreSQL's boolean test. A rule filter reads
// decision_rules in order and joins each of its rows' decision.
func decisionSelect(q DecisionQuery, pg bool) (string, []any, error) {
	if q.Limit < 1 || q.Limit > MaxDecisionPage {
		return "", nil, fmt.Errorf("%w: decision page limit %d is not 1 to %d", ErrInvalid, q.Limit, MaxDecisionPage)
	}
	var (
		b    strings.Builder
		args []any
	)
	// k is the table whose (at, id) orders the page.
	k, id := "d", "d.id"
	b.WriteString(`SELECT ` + decisionColumns + ` FROM decisions d`)
	if q.Rule != "" {
		k, id = "r", "r.decision_id"
		b.WriteString(` JOIN decision_rules r ON r.decision_id = d.id`)
	}
	b.WriteString(` WHERE 1 = 1`)
	for _, f := range [...]struct{ col, v string }{
		{"r.rule", q.Rule}, {"d.tenant", q.Tenant}, {"d.agent", q.Agent}, {"d.session_id", q.SessionID},
		{"d.request_id", q.RequestID}, {"d.hook", q.Hook}, {"d.tool", q.Tool}, {"d.outcome", q.Outcome},
		{"d.action", q.Action}, {"d.revision", q.Revision},
	} {
		if f.v != "" {
			b.WriteString(` AND ` + f.col + ` = ?`)
			args = append(args, f.v)
		}
	}
	if q.ShadowChanged != nil {
		switch {
		case pg && *q.ShadowChanged:
			b.WriteString(` AND d.shadow_changed`)
		case pg:
			b.WriteString(` AND NOT d.shadow_changed`)
		case *q.ShadowChanged:
			b.WriteString(` AND d.shadow_changed = 1`)
		default:
			b.WriteString(` AND d.shadow_changed = 0`)
		}
	}
	if !q.Since.IsZero() {
		b.WriteString(` AND ` + k + `.at >= ?`)
		args = append(args, nanos(q.Since))
	}
	if !q.Until.IsZero() {
		b.WriteString(` AND ` + k + `.at < ?`)
		args = append(args, nanos(q.Until))
	}
	cmp, dir := "<", "DESC"
	if q.Ascending {
		cmp, dir = ">", "ASC"
	}
	if q.After != nil {
		b.WriteString(` AND (` + k + `.at, ` + id + `) ` + cmp + ` (?, ?)`)
		args = append(args, nanos(q.After.Time), q.After.ID)
	}
	b.WriteString(` ORDER BY ` + k + `.at ` + dir + `, ` + id + ` ` + dir + ` LIMIT ?`)
	args = append(args, q.Limit)
	return b.String(), args, nil
}

// shadowCountSQL renders CountShadowChanged's statement with ?
// placeholders and its arguments; pg renders PostgreSQL's boolean test.
func shadowCountSQL(tenant string, since time.Time, pg bool) (string, []any) {
	query := `SELECT COUNT(*) FROM decisions d WHERE d.shadow_changed = 1 AND d.at >= ?`
	if pg {
		query = `SELECT COUNT(*) FROM decisions d WHERE d.shadow_changed AND d.at >= ?`
	}
	args := []any{nanos(since)}
	if tenant != "" {
		query += ` AND d.tenant = ?`
		args = append(args, tenant)
	}
	return query, args
}

// scanDecision reads one row of decisionColumns.
func scanDecision(row interface{ Scan(...any) error }) (*DecisionRow, error) {
	var (
		d      DecisionRow
		at     int64
		step   sql.NullInt64
		rules  string
		record string
	)
	if err := row.Scan(&d.ID, &at, &d.Tenant, &d.Agent, &d.SessionID, &d.RequestID, &d.Hook, &d.Tool,
		&d.ToolCallID, &step, &d.Outcome, &d.Action, &d.Revision, &d.ShadowChanged, &rules, &record); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(rules), &d.RulesFired); err != nil {
		return nil, fmt.Errorf("decision %d: stored rules: %w", d.ID, err)
	}
	if step.Valid {
		n := int(step.Int64)
		d.Step = &n
	}
	d.Time, d.Record = fromNanos(at), json.RawMessage(record)
	return &d, nil
}

// collectDecisions scans the rows of a decision query, whichever driver's.
func collectDecisions(next func() bool, row interface{ Scan(...any) error }, rowsErr func() error) ([]DecisionRow, error) {
	out := []DecisionRow{}
	for next() {
		d, err := scanDecision(row)
		if err != nil {
			return nil, fmt.Errorf("reading decisions: %w", err)
		}
		out = append(out, *d)
	}
	if err := rowsErr(); err != nil {
		return nil, fmt.Errorf("reading decisions: %w", err)
	}
	return out, nil
}

// InsertDecisions implements Decisions.
func (s *SQLite) InsertDecisions(ctx context.Context, rows []DecisionRow) error {
	all := make([][]any, len(rows))
	for i := range rows {
		args, err := decisionArgs(&rows[i])
		if err != nil {
			return fmt.Errorf("storing decisions: %w", err)
		}
		if args[12].(bool) {
			args[12] = 1
		} else {
			args[12] = 0
		}
		all[i] = args
	}
	if len(rows) == 0 {
		return nil
	}
	ids := make([]int64, len(rows))
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, insertDecisionSQL)
		if err != nil {
			return err
		}
		defer ins.Close()
		rule, err := tx.PrepareContext(ctx, insertDecisionRuleSQL)
		if err != nil {
			return err
		}
		defer rule.Close()
		for i := range rows {
			res, err := ins.ExecContext(ctx, all[i]...)
			if err != nil {
				return err
			}
			if ids[i], err = res.LastInsertId(); err != nil {
				return err
			}
			for _, r := range indexedRules(&rows[i]) {
				if _, err := rule.ExecContext(ctx, r, all[i][0], ids[i]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing decisions: %w", err)
	}
	for i := range rows {
		rows[i].ID = ids[i]
	}
	return nil
}

// QueryDecisions implements Decisions.
func (s *SQLite) QueryDecisions(ctx context.Context, q DecisionQuery) ([]DecisionRow, error) {
	query, args, err := decisionSelect(q, false)
	if err != nil {
		return nil, fmt.Errorf("reading decisions: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading decisions: %w", err)
	}
	defer rows.Close()
	return collectDecisions(rows.Next, rows, rows.Err)
}

// GetDecision implements Decisions.
func (s *SQLite) GetDecision(ctx context.Context, id int64) (*DecisionRow, error) {
	d, err := scanDecision(s.r.QueryRowContext(ctx, getDecisionSQL, id))
	if err != nil {
		return nil, fmt.Errorf("reading decision: %w", notFound(err))
	}
	return d, nil
}

// PruneDecisions implements Decisions.
func (s *SQLite) PruneDecisions(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, pruneDecisionsSQL, nanos(before), limit)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, pruneDecisionRulesSQL, nanos(before), limit*4)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("pruning decisions: %w", err)
	}
	return int(n), nil
}

// CountShadowChanged implements Decisions.
func (s *SQLite) CountShadowChanged(ctx context.Context, tenant string, since time.Time) (int64, error) {
	query, args := shadowCountSQL(tenant, since, false)
	var n int64
	if err := s.r.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting shadow disagreements: %w", err)
	}
	return n, nil
}

// The PostgreSQL forms of the statements.
var (
	pgGetDecision        = placeholders(getDecisionSQL)
	pgPruneDecisions     = placeholders(pruneDecisionsSQL)
	pgPruneDecisionRules = placeholders(pruneDecisionRulesSQL)
)

// InsertDecisions implements Decisions.
func (s *Postgres) InsertDecisions(ctx context.Context, rows []DecisionRow) error {
	if len(rows) == 0 {
		return nil
	}
	var (
		at     = make([]int64, len(rows))
		text   [13][]string // the text columns, in pgInsertDecisions' order
		step   = make([]*int64, len(rows))
		shadow = make([]bool, len(rows))
	)
	for c := range text {
		text[c] = make([]string, len(rows))
	}
	for i := range rows {
		args, err := decisionArgs(&rows[i])
		if err != nil {
			return fmt.Errorf("storing decisions: %w", err)
		}
		at[i] = args[0].(int64)
		for c, a := range [...]int{1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 13, 14} {
			text[c][i] = args[a].(string)
		}
		if n, ok := args[8].(int64); ok {
			step[i] = &n
		}
		shadow[i] = args[12].(bool)
		text[12][i] = strings.Join(indexedRules(&rows[i]), ruleSeparator)
	}
	cols := []any{at, text[0], text[1], text[2], text[3], text[4], text[5], text[6], step,
		text[7], text[8], text[9], shadow, text[10], text[11], text[12]}
	ids := make([]int64, 0, len(rows))
	err := s.writeStatement(ctx, cacheKey{}, func(ctx context.Context, conn *pgxpool.Conn) error {
		ids = ids[:0]
		res, err := conn.Query(ctx, pgInsertDecisions, cols...)
		if err != nil {
			return err
		}
		for res.Next() {
			var id int64
			if err := res.Scan(&id); err != nil {
				res.Close()
				return err
			}
			ids = append(ids, id)
		}
		return res.Err()
	}, nil)
	if err == nil && len(ids) != len(rows) {
		err = fmt.Errorf("stored %d rows of %d", len(ids), len(rows))
	}
	if err != nil {
		return fmt.Errorf("storing decisions: %w", pgError(err))
	}
	for i := range rows {
		rows[i].ID = ids[i]
	}
	return nil
}

// QueryDecisions implements Decisions.
func (s *Postgres) QueryDecisions(ctx context.Context, q DecisionQuery) ([]DecisionRow, error) {
	query, args, err := decisionSelect(q, true)
	if err != nil {
		return nil, fmt.Errorf("reading decisions: %w", err)
	}
	rows, err := s.pool.Query(ctx, placeholders(query), args...)
	if err != nil {
		return nil, fmt.Errorf("reading decisions: %w", pgError(err))
	}
	defer rows.Close()
	return collectDecisions(rows.Next, rows, rows.Err)
}

// GetDecision implements Decisions.
func (s *Postgres) GetDecision(ctx context.Context, id int64) (*DecisionRow, error) {
	d, err := scanDecision(s.pool.QueryRow(ctx, pgGetDecision, id))
	if err != nil {
		return nil, fmt.Errorf("reading decision: %w", pgError(notFound(err)))
	}
	return d, nil
}

// PruneDecisions implements Decisions.
func (s *Postgres) PruneDecisions(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, cacheKey{}, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, pgPruneDecisions, nanos(before), limit)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, pgPruneDecisionRules, nanos(before), limit*4)
		return err
	}, nil)
	if err != nil {
		return 0, fmt.Errorf("pruning decisions: %w", pgError(err))
	}
	return int(n), nil
}

// CountShadowChanged implements Decisions.
func (s *Postgres) CountShadowChanged(ctx context.Context, tenant string, since time.Time) (int64, error) {
	query, args := shadowCountSQL(tenant, since, true)
	var n int64
	if err := s.pool.QueryRow(ctx, placeholders(query), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting shadow disagreements: %w", pgError(err))
	}
	return n, nil
}

// FormatDecisionID renders a row id as the admin API names it.
func FormatDecisionID(id int64) string { return strconv.FormatInt(id, 10) }

// The wrapped store's methods go through its middleware.

func (w *wrapped) InsertDecisions(ctx context.Context, rows []DecisionRow) error {
	return call0(w, ctx, "InsertDecisions", func(ctx context.Context) error { return w.st.InsertDecisions(ctx, rows) })
}

func (w *wrapped) QueryDecisions(ctx context.Context, q DecisionQuery) ([]DecisionRow, error) {
	return call1(w, ctx, "QueryDecisions", func(ctx context.Context) ([]DecisionRow, error) { return w.st.QueryDecisions(ctx, q) })
}

func (w *wrapped) GetDecision(ctx context.Context, id int64) (*DecisionRow, error) {
	return call1(w, ctx, "GetDecision", func(ctx context.Context) (*DecisionRow, error) { return w.st.GetDecision(ctx, id) })
}

func (w *wrapped) PruneDecisions(ctx context.Context, before time.Time, limit int) (int, error) {
	return call1(w, ctx, "PruneDecisions", func(ctx context.Context) (int, error) { return w.st.PruneDecisions(ctx, before, limit) })
}

func (w *wrapped) CountShadowChanged(ctx context.Context, tenant string, since time.Time) (int64, error) {
	return call1(w, ctx, "CountShadowChanged", func(ctx context.Context) (int64, error) {
		return w.st.CountShadowChanged(ctx, tenant, since)
	})
}
