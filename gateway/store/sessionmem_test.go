package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
)

// TestSessionMemory covers the writable blocks, compactions and input
// tokens of a session on both drivers: tenants apart, a compaction resets
// the tokens, text PostgreSQL cannot hold is refused on both.
func TestSessionMemory(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		st, err := s.SessionState(ctx, "t1", "s1")
		if err != nil || len(st.Blocks) != 0 || st.Compaction != nil || st.LastInputTokens != 0 {
			t.Fatalf("empty state = %+v, %v", st, err)
		}
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(s.PutContextBlock(ctx, "t1", "s1", "memory", "likes tea"))
		must(s.PutContextBlock(ctx, "t1", "s1", "memory", "likes coffee"))
		must(s.PutContextBlock(ctx, "t2", "s1", "memory", "other tenant"))
		must(s.SetLastInputTokens(ctx, "t1", "s1", 1200))
		must(s.SetLastInputTokens(ctx, "t1", "s1", 1500))
		st, err = s.SessionState(ctx, "t1", "s1")
		must(err)
		if st.Blocks["memory"] != "likes coffee" || len(st.Blocks) != 1 || st.LastInputTokens != 1500 || st.Compaction != nil {
			t.Fatalf("state = %+v", st)
		}
		for i, through := range []string{"m2", "m\xff4"} {
			must(s.AddCompaction(ctx, &Compaction{Tenant: "t1", SessionID: "s1", ThroughMessageID: through, MessageCount: 2 * (i + 1),
				Summary: "summary " + through[:1], Reason: CompactThreshold, InputTokens: 1500, Model: "fast"}))
		}
		st, err = s.SessionState(ctx, "t1", "s1")
		must(err)
		if c := st.Compaction; c == nil || c.ThroughMessageID != "m\xff4" || c.MessageCount != 4 || c.Model != "fast" || c.CreatedAt.IsZero() {
			t.Fatalf("latest compaction = %+v", c)
		}
		if st.LastInputTokens != 0 {
			t.Errorf("a compaction left the input tokens at %d", st.LastInputTokens)
		}
		all, err := s.Compactions(ctx, "t1", "s1")
		must(err)
		if len(all) != 2 || all[0].ThroughMessageID != "m2" {
			t.Fatalf("compactions = %+v", all)
		}
		if other, err := s.Compactions(ctx, "t2", "s1"); err != nil || len(other) != 0 {
			t.Errorf("t2's compactions = %+v, %v", other, err)
		}
		for name, err := range map[string]error{
			"nul content":  s.PutContextBlock(ctx, "t1", "s1", "memory", "a\x00b"),
			"bad utf8":     s.PutContextBlock(ctx, "t1", "s1", "memory", "\xff"),
			"empty name":   s.PutContextBlock(ctx, "t1", "s1", "", "x"),
			"no reason":    s.AddCompaction(ctx, &Compaction{Tenant: "t1", SessionID: "s1", ThroughMessageID: "m", MessageCount: 1}),
			"no messages":  s.AddCompaction(ctx, &Compaction{Tenant: "t1", SessionID: "s1", ThroughMessageID: "m", Reason: CompactOverflow}),
			"empty tenant": s.SetLastInputTokens(ctx, "", "s1", 1),
		} {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
		}
	})
}

// TestSearchMessages searches a session's stored text on both drivers:
// any word of the query matches, case and punctuation aside; a replaced
// message is found by its new text, a dropped one no more; another
// tenant's session and query syntax find nothing and break nothing.
func TestSearchMessages(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		put := func(tenant, id, role, text string) {
			t.Helper()
			m := engine.UIMessage{ID: id, Role: role, Parts: []engine.UIPart{{Type: engine.PartStepStart}, {Type: engine.PartText, Text: text}}}
			if _, err := s.Admit(ctx, tenant, "a", "s1", nil, &m); err != nil {
				t.Fatal(err)
			}
		}
		put("t1", "m1", engine.RoleUser, "What is the weather in Paris?")
		put("t1", "m2", engine.RoleAssistant, "It is sunny in Paris today.")
		put("t1", "m3", engine.RoleUser, "And in Lyon, tomorrow?")
		put("t2", "x1", engine.RoleUser, "Paris secrets of another tenant")
		ids := func(query string) string {
			t.Helper()
			hits, err := s.SearchMessages(ctx, "t1", "s1", query, 10)
			if err != nil {
				t.Fatalf("search %q: %v", query, err)
			}
			var out []string
			for _, h := range hits {
				out = append(out, h.MessageID)
				if h.Role == "" || !strings.Contains(h.Snippet, "[") {
					t.Errorf("hit %+v has no role or no marked term", h)
				}
			}
			slices.Sort(out)
			return strings.Join(out, ",")
		}
		for query, want := range map[string]string{
			"paris":                    "m1,m2",
			"PARIS!":                   "m1,m2",
			"lyon OR sunny":            "m2,m3",
			`weather" NEAR(x) * -- ;'`: "m1",
			"berlin":                   "",
			"secrets":                  "",
		} {
			if got := ids(query); got != want {
				t.Errorf("search %q = %q, want %q", query, got, want)
			}
		}
		replaced := engine.UIMessage{ID: "m3", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: "And in Berlin?"}}}
		if err := s.UpsertMessage(ctx, "t1", "s1", replaced); err != nil {
			t.Fatal(err)
		}
		if got := ids("berlin lyon"); got != "m3" {
			t.Errorf("after the replacement: %q, want m3 by its new text", got)
		}
		if err := s.TruncateAfter(ctx, "t1", "s1", "m2", true); err != nil {
			t.Fatal(err)
		}
		if got := ids("paris berlin"); got != "m1" {
			t.Errorf("after dropping m2 and m3: %q, want m1", got)
		}
		for name, err := range map[string]error{
			"no words":  func() error { _, err := s.SearchMessages(ctx, "t1", "s1", " -- ", 5); return err }(),
			"limit 0":   func() error { _, err := s.SearchMessages(ctx, "t1", "s1", "paris", 0); return err }(),
			"no tenant": func() error { _, err := s.SearchMessages(ctx, "", "s1", "paris", 5); return err }(),
		} {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			}
		}
	})
}

// FuzzSearchMessages: whatever the query (a model writes it), a SQLite
// search answers hits or ErrInvalid, never a query error.
func FuzzSearchMessages(f *testing.F) {
	db := freshSQLite(f)
	s := open(f, db)
	ctx := context.Background()
	m := engine.UIMessage{ID: "m1", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: "the weather in Paris"}}}
	if _, err := s.Admit(ctx, "t1", "a", "s1", nil, &m); err != nil {
		f.Fatal(err)
	}
	for _, q := range []string{"paris", `"paris`, "NEAR(a b)", "a* OR -b", "ünïcode ∑ 東京", "' ; DROP TABLE messages; --", "^x", "col:paris"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		if _, err := s.SearchMessages(ctx, "t1", "s1", q, 5); err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("search %q: %v", q, err)
		}
	})
}
