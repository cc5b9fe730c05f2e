package store

import (
	"context"
	"errors"
	"testing"
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
