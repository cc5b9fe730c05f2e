package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
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

// benchDecisionStore opens the SQLite store of the data set, built once
// and kept in the temporary directory (the build takes minutes; a rebuild
// happens when the file is missing or the schema changed).
func benchDecisionStore(b *testing.B) (Store, time.Time) {
	start := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	ms, err := loadMigrations(migrations, "migrations/sqlite")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("turngate-bench-decisions-%d-v%d.db", benchDecisions, len(ms)))
	if _, err := os.Stat(path + ".done"); err != nil {
		os.Remove(path)
		built := time.Now()
		st, err := OpenSQLite(path, WithSynchronous(SynchronousNormal))
		if err != nil {
			b.Fatal(err)
		}
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
		st.Close()
		if err := os.WriteFile(path+".done", nil, 0o600); err != nil {
			b.Fatal(err)
		}
		b.Logf("built %d decisions in %s at %s", benchDecisions, time.Since(built).Round(time.Second), path)
	}
	st, err := OpenSQLite(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st, start
}

// BenchmarkDecisionsPage: a filtered page of 50 out of 1,000,000 stored
// decisions (SQLite), as GET /v1/admin/decisions asks for it. Run it
// with: go test ./gateway/store -run '^$' -bench DecisionsPage -benchtime 200x
func BenchmarkDecisionsPage(b *testing.B) {
	st, start := benchDecisionStore(b)
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
		b.Run(tc.name, func(b *testing.B) {
			q := tc.q
			q.Limit = 50
			var n int
			for b.Loop() {
				rows, err := st.QueryDecisions(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				n = len(rows)
			}
			b.ReportMetric(float64(n), "rows")
		})
	}
}
