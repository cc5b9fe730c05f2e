package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// decisionAt is a decision row of tenant at second sec of a fixed day.
func decisionAt(tenant string, sec int, hook, tool, action string, rules ...string) DecisionRow {
	step := sec % 3
	return DecisionRow{Time: time.Date(2026, 12, 1, 10, 0, sec, 0, time.UTC), Tenant: tenant, Agent: "support",
		SessionID: "s-" + tenant, RequestID: fmt.Sprintf("req-%d", sec/10), Hook: hook, Tool: tool, Step: &step,
		Outcome: "matched", Action: action, Revision: "sha256:abc", ShadowChanged: sec%7 == 0, RulesFired: rules,
		Record: json.RawMessage(fmt.Sprintf(`{"hook":%q,"n":%d}`, hook, sec))}
}

func TestDecisionsQuery(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		var rows []DecisionRow
		for sec := range 40 {
			tenant, tool, action := "acme", "send_email", "allow"
			if sec%2 == 1 {
				tenant = "globex"
			}
			if sec%5 == 0 {
				tool, action = "wire_transfer", "block"
			}
			rows = append(rows, decisionAt(tenant, sec, "beforeToolCall", tool, action, "tools.rego:12", fmt.Sprintf("r%d", sec%4)))
		}
		if err := s.InsertDecisions(ctx, rows); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(rows); i++ {
			if rows[i].ID <= rows[i-1].ID {
				t.Fatalf("ids not increasing: %d then %d", rows[i-1].ID, rows[i].ID)
			}
		}
		yes, no := true, false
		tests := []struct {
			name string
			q    DecisionQuery
			want []int // seconds, in order
		}{
			{"newest first", DecisionQuery{Limit: 3}, []int{39, 38, 37}},
			{"oldest first", DecisionQuery{Limit: 3, Ascending: true}, []int{0, 1, 2}},
			{"tenant", DecisionQuery{Tenant: "globex", Limit: 3}, []int{39, 37, 35}},
			{"tool and action", DecisionQuery{Tool: "wire_transfer", Action: "block", Limit: 100}, []int{35, 30, 25, 20, 15, 10, 5, 0}},
			{"tenant and tool", DecisionQuery{Tenant: "acme", Tool: "wire_transfer", Limit: 100}, []int{30, 20, 10, 0}},
			{"rule", DecisionQuery{Rule: "r3", Limit: 100}, []int{39, 35, 31, 27, 23, 19, 15, 11, 7, 3}},
			{"rule and tenant", DecisionQuery{Rule: "r2", Tenant: "acme", Limit: 3}, []int{38, 34, 30}},
			{"rule oldest first since", DecisionQuery{Rule: "tools.rego:12", Since: rows[30].Time, Ascending: true, Limit: 2}, []int{30, 31}},
			{"time range", DecisionQuery{Since: rows[10].Time, Until: rows[13].Time, Limit: 100}, []int{12, 11, 10}},
			{"shadow changed", DecisionQuery{ShadowChanged: &yes, Limit: 100}, []int{35, 28, 21, 14, 7, 0}},
			{"shadow unchanged", DecisionQuery{ShadowChanged: &no, Until: rows[3].Time, Limit: 100}, []int{2, 1}},
			{"request", DecisionQuery{RequestID: "req-2", Tenant: "acme", Limit: 100, Ascending: true}, []int{20, 22, 24, 26, 28}},
			{"no such agent", DecisionQuery{Agent: "nobody", Limit: 10}, nil},
			{"after a key", DecisionQuery{After: &DecisionKey{Time: rows[20].Time, ID: rows[20].ID}, Limit: 2}, []int{19, 18}},
			{"after a key ascending", DecisionQuery{After: &DecisionKey{Time: rows[20].Time, ID: rows[20].ID}, Ascending: true, Limit: 2}, []int{21, 22}},
		}
		for _, tt := range tests {
			got, err := s.QueryDecisions(ctx, tt.q)
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			var secs []int
			for _, d := range got {
				secs = append(secs, d.Time.Second())
			}
			if !slices.Equal(secs, tt.want) {
				t.Errorf("%s: got seconds %v, want %v", tt.name, secs, tt.want)
			}
		}
		d, err := s.GetDecision(ctx, rows[7].ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Tenant != "globex" || d.Tool != "send_email" || !d.ShadowChanged || *d.Step != 1 ||
			!slices.Equal(d.RulesFired, []string{"tools.rego:12", "r3"}) || string(d.Record) != `{"hook":"beforeToolCall","n":7}` {
			t.Errorf("GetDecision: %+v", d)
		}
		if _, err := s.GetDecision(ctx, rows[39].ID+100); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetDecision of a missing id: %v, want ErrNotFound", err)
		}
		if _, err := s.QueryDecisions(ctx, DecisionQuery{Limit: MaxDecisionPage + 1}); !errors.Is(err, ErrInvalid) {
			t.Errorf("limit beyond MaxDecisionPage: %v, want ErrInvalid", err)
		}
	})
}

func TestDecisionsRefuseBadRows(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		good := decisionAt("acme", 1, "beforeTurn", "", "")
		for name, bad := range map[string]func(r *DecisionRow){
			"no hook":        func(r *DecisionRow) { r.Hook = "" },
			"no time":        func(r *DecisionRow) { r.Time = time.Time{} },
			"record no json": func(r *DecisionRow) { r.Record = json.RawMessage(`{`) },
			"NUL in tenant":  func(r *DecisionRow) { r.Tenant = "a\x00b" },
			"bad UTF-8 tool": func(r *DecisionRow) { r.Tool = "\xff" },
		} {
			r := good
			bad(&r)
			if err := s.InsertDecisions(ctx, []DecisionRow{good, r}); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		// Nothing of a refused batch is stored.
		if got, _ := s.QueryDecisions(ctx, DecisionQuery{Limit: 10}); len(got) != 0 {
			t.Errorf("a refused batch stored %d rows", len(got))
		}
	})
}

func TestDecisionsPrune(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		var rows []DecisionRow
		for sec := range 30 {
			rows = append(rows, decisionAt("acme", sec, "beforeToolCall", "t", "allow", "rule-a", "rule-b"))
		}
		if err := s.InsertDecisions(ctx, rows); err != nil {
			t.Fatal(err)
		}
		before := rows[25].Time
		// Bounded: each call deletes at most its limit, oldest first.
		var passes []int
		for {
			n, err := s.PruneDecisions(ctx, before, 10)
			if err != nil {
				t.Fatal(err)
			}
			passes = append(passes, n)
			if n < 10 {
				break
			}
		}
		if !slices.Equal(passes, []int{10, 10, 5}) {
			t.Errorf("prune passes deleted %v, want [10 10 5]", passes)
		}
		left, err := s.QueryDecisions(ctx, DecisionQuery{Ascending: true, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 5 || left[0].Time.Second() != 25 {
			t.Errorf("after pruning: %d rows from second %d, want 5 from 25", len(left), left[0].Time.Second())
		}
		byRule, err := s.QueryDecisions(ctx, DecisionQuery{Rule: "rule-b", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(byRule) != 5 {
			t.Errorf("rule index after pruning: %d rows, want 5", len(byRule))
		}
	})
}

// TestDecisionsPagesStableUnderInserts pages through the rows newest first
// while other rows are stored: every row stored before the first page is
// seen exactly once, in order.
func TestDecisionsPagesStableUnderInserts(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		var rows []DecisionRow
		for sec := range 50 {
			rows = append(rows, decisionAt("acme", sec, "beforeStep", "", ""))
		}
		if err := s.InsertDecisions(ctx, rows); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// Newer rows, and rows at the times already paged.
				late := decisionAt("acme", 25+i%20, "beforeStep", "", "")
				newer := decisionAt("acme", 55, "beforeStep", "", "")
				if err := s.InsertDecisions(ctx, []DecisionRow{late, newer}); err != nil {
					t.Error(err)
					return
				}
			}
		})
		first := rows[len(rows)-1].Key()
		first.ID++ // start just after the newest row stored before paging
		var (
			seen  []int64
			after = &first
		)
		for {
			page, err := s.QueryDecisions(ctx, DecisionQuery{After: after, Limit: 7})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range page {
				if d.ID <= rows[len(rows)-1].ID {
					seen = append(seen, d.ID)
				}
			}
			if len(page) < 7 {
				break
			}
			k := page[len(page)-1].Key()
			after = &k
		}
		close(stop)
		wg.Wait()
		var want []int64
		for i := len(rows) - 1; i >= 0; i-- {
			want = append(want, rows[i].ID)
		}
		if !slices.Equal(seen, want) {
			t.Errorf("paging saw %v\nwant %v", seen, want)
		}
	})
}

// TestDecisionsFilters: each filter of DecisionQuery selects exactly the
// rows that match it, on rows whose every indexed field varies
// independently of the others (agent, session, hook, outcome, action,
// revision, shadow change, rules fired, tool, time), newest first and
// oldest first.
func TestDecisionsFilters(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		hooks := []string{"beforeTurn", "beforeToolCall", "afterToolCall", "onChatResponse", "beforeModelCall"}
		outcomes := []string{"matched", "no_match", "error"}
		tools := []string{"send_email", "wire_transfer", "search", ""}
		var rows []DecisionRow
		for i := range 84 {
			r := decisionAt([]string{"acme", "globex"}[i%2], i%60, hooks[i%5], tools[i%4], []string{"allow", "block", ""}[i%3], fmt.Sprintf("r%d", i%4))
			r.Time = r.Time.Add(time.Duration(i/60) * time.Minute)
			r.Agent = []string{"support", "billing", "ops"}[i%3]
			r.SessionID = fmt.Sprintf("s%d", i%4)
			r.RequestID = fmt.Sprintf("req-%d", i%6)
			r.Outcome = outcomes[(i/2)%3]
			r.Revision = fmt.Sprintf("sha256:rev%d", i/30) // revisions follow each other in time
			r.ShadowChanged = i%7 == 0
			if i%5 == 0 {
				r.RulesFired = append(r.RulesFired, "shadow.rego:3")
			}
			rows = append(rows, r)
		}
		if err := s.InsertDecisions(ctx, rows); err != nil {
			t.Fatal(err)
		}
		yes, no := true, false
		for _, tc := range []struct {
			name  string
			q     DecisionQuery
			match func(r DecisionRow) bool
		}{
			{"tenant", DecisionQuery{Tenant: "globex"}, func(r DecisionRow) bool { return r.Tenant == "globex" }},
			{"agent", DecisionQuery{Agent: "billing"}, func(r DecisionRow) bool { return r.Agent == "billing" }},
			{"session", DecisionQuery{SessionID: "s3"}, func(r DecisionRow) bool { return r.SessionID == "s3" }},
			{"turn", DecisionQuery{RequestID: "req-5"}, func(r DecisionRow) bool { return r.RequestID == "req-5" }},
			{"hook", DecisionQuery{Hook: "afterToolCall"}, func(r DecisionRow) bool { return r.Hook == "afterToolCall" }},
			{"tool", DecisionQuery{Tool: "wire_transfer"}, func(r DecisionRow) bool { return r.Tool == "wire_transfer" }},
			{"outcome", DecisionQuery{Outcome: "no_match"}, func(r DecisionRow) bool { return r.Outcome == "no_match" }},
			{"action", DecisionQuery{Action: "block"}, func(r DecisionRow) bool { return r.Action == "block" }},
			{"revision", DecisionQuery{Revision: "sha256:rev1"}, func(r DecisionRow) bool { return r.Revision == "sha256:rev1" }},
			{"shadow changed", DecisionQuery{ShadowChanged: &yes}, func(r DecisionRow) bool { return r.ShadowChanged }},
			{"shadow unchanged", DecisionQuery{ShadowChanged: &no}, func(r DecisionRow) bool { return !r.ShadowChanged }},
			{"rule fired", DecisionQuery{Rule: "shadow.rego:3"}, func(r DecisionRow) bool { return slices.Contains(r.RulesFired, "shadow.rego:3") }},
			{"since", DecisionQuery{Since: rows[50].Time}, func(r DecisionRow) bool { return !r.Time.Before(rows[50].Time) }},
			{"until", DecisionQuery{Until: rows[20].Time}, func(r DecisionRow) bool { return r.Time.Before(rows[20].Time) }},
			{"tenant, agent and hook", DecisionQuery{Tenant: "acme", Agent: "ops", Hook: "beforeTurn"},
				func(r DecisionRow) bool { return r.Tenant == "acme" && r.Agent == "ops" && r.Hook == "beforeTurn" }},
			{"session and outcome in a time range", DecisionQuery{SessionID: "s1", Outcome: "matched", Since: rows[10].Time, Until: rows[70].Time},
				func(r DecisionRow) bool {
					return r.SessionID == "s1" && r.Outcome == "matched" && !r.Time.Before(rows[10].Time) && r.Time.Before(rows[70].Time)
				}},
			{"rule and revision", DecisionQuery{Rule: "r2", Revision: "sha256:rev0"}, func(r DecisionRow) bool { return slices.Contains(r.RulesFired, "r2") && r.Revision == "sha256:rev0" }},
			{"tool, action and shadow", DecisionQuery{Tool: "search", Action: "allow", ShadowChanged: &no},
				func(r DecisionRow) bool { return r.Tool == "search" && r.Action == "allow" && !r.ShadowChanged }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var want []int64
				for _, r := range rows {
					if tc.match(r) {
						want = append(want, r.ID)
					}
				}
				if len(want) == 0 || len(want) == len(rows) {
					t.Fatalf("the filter matches %d of the %d rows: the seed does not test it", len(want), len(rows))
				}
				for _, asc := range []bool{true, false} {
					q := tc.q
					q.Limit, q.Ascending = MaxDecisionPage, asc
					got, err := s.QueryDecisions(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					ids := make([]int64, len(got))
					for i, d := range got {
						ids[i] = d.ID
					}
					if !asc {
						slices.Reverse(ids)
					}
					if !slices.Equal(ids, want) {
						t.Errorf("ascending %v: ids %v, want %v", asc, ids, want)
					}
				}
			})
		}
	})
}

// TestShadowCountsByTenant counts the shadow disagreements of a tenant and
// of every tenant since a time, reading an index on either driver (the
// plan names one; PostgreSQL's with sequential scans disabled, as its
// planner prefers a scan of a table this small).
func TestShadowCountsByTenant(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		var rows []DecisionRow
		for sec := range 40 { // shadow changed at 0, 7, 14, 21, 28, 35
			tenant := "acme"
			if sec%2 == 1 {
				tenant = "globex"
			}
			rows = append(rows, decisionAt(tenant, sec, "beforeToolCall", "send_email", "allow"))
		}
		if err := s.InsertDecisions(ctx, rows); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			tenant string
			since  time.Time
			want   int64
		}{
			{"acme", rows[0].Time, 3},    // 0, 14, 28
			{"globex", rows[0].Time, 3},  // 7, 21, 35
			{"", rows[0].Time, 6},        // every tenant
			{"acme", rows[14].Time, 2},   // since is inclusive
			{"", rows[29].Time, 1},       // 35
			{"initech", rows[0].Time, 0}, // no such tenant
		} {
			got, err := s.CountShadowChanged(ctx, tt.tenant, tt.since)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("CountShadowChanged(%q, second %d) = %d, want %d", tt.tenant, tt.since.Second(), got, tt.want)
			}
		}
		for _, tenant := range []string{"acme", ""} {
			plan := shadowCountPlan(t, s, tenant, rows[0].Time)
			if !strings.Contains(plan, "decisions_tenant") && !strings.Contains(plan, "decisions_shadow_changed") {
				t.Errorf("the count of tenant %q reads no index:\n%s", tenant, plan)
			}
		}
	})
}

// shadowCountPlan returns the query plan of CountShadowChanged's statement
// on s's driver.
func shadowCountPlan(t *testing.T, s Store, tenant string, since time.Time) string {
	t.Helper()
	for w, ok := s.(*wrapped); ok; w, ok = s.(*wrapped) {
		s = w.st
	}
	var plan strings.Builder
	switch st := s.(type) {
	case *SQLite:
		query, args := shadowCountSQL(tenant, since, false)
		rows, err := st.r.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+query, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(detail + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	case *Postgres:
		query, args := shadowCountSQL(tenant, since, true)
		ctx := context.Background()
		conn, err := st.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, `SET enable_seqscan = off`); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(ctx, `RESET enable_seqscan`)
		rows, err := conn.Query(ctx, `EXPLAIN `+placeholders(query), args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("no query plan for a %T", s)
	}
	t.Logf("plan of the shadow count of tenant %q:\n%s", tenant, plan.String())
	return plan.String()
}
