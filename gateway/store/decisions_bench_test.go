package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/turngate/turngate/gateway/store/storetest"
)

// benchDecisions is the size of BenchmarkDecisionsPage's data set.
const benchDecisions = 1_000_000

// benchDecisionRow is row i of the data set: 20 tenants, 200 agents, 20,000
// sessions of 5 turns of 10 records, 30 tools, a block in every 50 tool
// calls, 100 rules, a shadow change in every 500 records, over a week.
func benchDecisionRow(i int, start time.Time) DecisionRow {
	hooks := [...]string{"beforeTurn", "beforeStep", "beforeToolCall", "afterToolCall", "onStepFinish", "beforeToolCall", "afterToolCall", "toolResult", "onStepFinish", "onChatResponse"}
	hook := hooks[i%len(hooks)]
	turn := i / len(hooks)
	row := DecisionRow{Time: start.Add(time.Duration(i) * 600 * time.Millisecond), Tenant: fmt.Sprintf("tenant-%d", turn%20),
		Agent: fmt.Sprintf("agent-%d", turn%200), SessionID: fmt.Sprintf("session-%d", turn/5), RequestID: fmt.Sprintf("req-%d", turn),
		Hook: hook, Outcome: "no_match", Revision: fmt.Sprintf("sha256:%064d", turn/20000), ShadowChanged: i%500 == 0}
	if hook == "beforeToolCall" || hook == "afterToolCall" || hook == "toolResult" {
		row.Tool = fmt.Sprintf("tool-%d", (turn+i)%30)
		row.ToolCallID = fmt.Sprintf("call-%d", i)
		row.Action = "allow"
		if turn%50 == 0 {
			row.Action, row.Outcome, row.RulesFired = "block", "matched", []string{fmt.Sprintf("tools.rego:%d", turn%100)}
		}
	}
	row.Record = json.RawMessage(fmt.Sprintf(`{"agent":%q,"hook":%q,"input":{"tool":{"name":%q,"input":{"query":"a search of some length to make the record realistic"}}},"kind":"decision","outcome":%q,"requestId":%q,"seq":%d,"sessionId":%q,"tenant":%q}`,
		row.Agent, hook, row.Tool, row.Outcome, row.RequestID, i, row.SessionID, row.Tenant))
	return row
}

// benchDecisionStores opens the stores of the data set, SQLite and
// PostgreSQL, each built once and kept (the build takes minutes; a
// rebuild happens when the data set is missing or the schema changed):
// the SQLite file in the temporary directory, the PostgreSQL schema
// bench_decisions_N_vM in the tests' database (storetest.DSN).
func benchDecisionStores(b *testing.B) (map[string]Store, time.Time) {
	start := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	return map[string]Store{"sqlite": benchSQLiteDecisions(b, start), "postgres": benchPostgresDecisions(b, start)}, start
}

// benchSQLiteDecisions is the data set's SQLite store.
func benchSQLiteDecisions(b *testing.B, start time.Time) Store {
	ms, err := loadMigrations(migrations, "migrations/sqlite")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("turngate-bench-decisions-%d-v%d.db", benchDecisions, len(ms)))
	if _, err := os.Stat(path + ".done"); err != nil {
		os.Remove(path)
		st, err := OpenSQLite(path, WithSynchronous(SynchronousNormal))
		if err != nil {
			b.Fatal(err)
		}
		fillBenchDecisions(b, st, start, path)
		st.Close()
		if err := os.WriteFile(path+".done", nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	st, err := OpenSQLite(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// benchPostgresDecisions is the data set's PostgreSQL store, in a schema
// of its own that a table bench_built marks as whole.
func benchPostgresDecisions(b *testing.B, start time.Time) Store {
	ms, err := loadMigrations(migrations, "migrations/postgres")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	schema := fmt.Sprintf("bench_decisions_%d_v%d", benchDecisions, len(ms))
	admin, err := pgxpool.New(ctx, storetest.DSN())
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	var built bool
	if err := admin.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, schema+".bench_built").Scan(&built); err != nil {
		b.Fatalf("PostgreSQL at %s (TURNGATE_TEST_PG_DSN): %v", storetest.DSN(), err)
	}
	dsn := storetest.WithSearchPath(b, storetest.DSN(), schema)
	if !built {
		if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE; CREATE SCHEMA "+schema); err != nil {
			b.Fatal(err)
		}
		st, err := OpenPostgres(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		fillBenchDecisions(b, st, start, "schema "+schema)
		st.Close()
		if _, err := admin.Exec(ctx, "ANALYZE "+schema+".decisions; ANALYZE "+schema+".decision_rules; CREATE TABLE "+schema+".bench_built ()"); err != nil {
			b.Fatal(err)
		}
	}
	st, err := OpenPostgres(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// fillBenchDecisions stores the data set into st, 5,000 rows an insert.
func fillBenchDecisions(b *testing.B, st Store, start time.Time, where string) {
	built := time.Now()
	const batch = 5000
	rows := make([]DecisionRow, 0, batch)
	for i := range benchDecisions {
		rows = append(rows, benchDecisionRow(i, start))
		if len(rows) == batch {
			if err := st.InsertDecisions(context.Background(), rows); err != nil {
				b.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	b.Logf("built %d decisions in %s in %s", benchDecisions, time.Since(built).Round(time.Second), where)
}

// BenchmarkDecisionsPage: a filtered page of 50 out of 1,000,000 stored
// decisions, on SQLite and on PostgreSQL, as GET /v1/admin/decisions asks
// for it. Run it with:
// go test ./gateway/store -run '^$' -bench DecisionsPage -benchtime 100x
func BenchmarkDecisionsPage(b *testing.B) {
	stores, start := benchDecisionStores(b)
	ctx := context.Background()
	week := start.Add(7 * 24 * time.Hour)
	yes := true
	for _, tc := range []struct {
		name string
		q    DecisionQuery
	}{
		{"newest", DecisionQuery{}},
		{"tenant", DecisionQuery{Tenant: "tenant-7"}},
		{"tenant+tool+block", DecisionQuery{Tenant: "tenant-0", Tool: "tool-3", Action: "block"}},
		{"hook+action+day", DecisionQuery{Hook: "beforeToolCall", Action: "block", Since: start.Add(48 * time.Hour), Until: start.Add(72 * time.Hour)}},
		{"rule+tenant", DecisionQuery{Rule: "tools.rego:50", Tenant: "tenant-10"}},
		{"shadowChanged", DecisionQuery{ShadowChanged: &yes}},
		{"turn timeline", DecisionQuery{RequestID: "req-77777", Ascending: true}},
		{"session, oldest first", DecisionQuery{SessionID: "session-4321", Ascending: true, Until: week}},
	} {
		for _, driver := range []string{"sqlite", "postgres"} {
			b.Run(driver+"/"+tc.name, func(b *testing.B) {
				q := tc.q
				q.Limit = 50
				var n int
				for b.Loop() {
					rows, err := stores[driver].QueryDecisions(ctx, q)
					if err != nil {
						b.Fatal(err)
					}
					n = len(rows)
				}
				b.ReportMetric(float64(n), "rows")
			})
		}
	}
}
