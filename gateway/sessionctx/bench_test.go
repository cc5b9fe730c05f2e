package sessionctx

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
)

// BenchmarkPrepare measures what the session configuration adds to a
// turn before the model runs: the session state read from SQLite (three
// indexed reads), four context blocks rendered (text, a file checked for
// changes, a writable block, text), the compaction check on a 20-message
// transcript below its threshold (no step reported tokens yet, so the
// estimate is computed), and the cache-ordered system blocks.
func BenchmarkPrepare(b *testing.B) {
	dir := b.TempDir()
	st, err := store.OpenSQLite(filepath.Join(dir, "turngate.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	file := filepath.Join(dir, "rules.md")
	if err := os.WriteFile(file, []byte("Answer in English.\nCite the policy number.\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	soul, extra := "You are a careful support agent.", "Be brief."
	cfg := &config.Session{
		Context: []config.ContextBlock{
			{Name: "soul", Text: &soul},
			{Name: "rules", File: file},
			{Name: "memory", Description: "Facts about the user.", Writable: true, MaxTokens: 500},
			{Name: "style", Text: &extra},
		},
		Compaction:   &config.Compaction{After: 100_000, Model: "m", KeepLast: 4},
		CachedPrompt: true,
	}
	a := New(cfg, "", Deps{Store: st})
	id := engine.Identity{SessionID: "s1", Principal: engine.Principal{Tenant: "t1"}}
	ctx := context.Background()
	if err := st.PutContextBlock(ctx, "t1", "s1", "memory", "The user likes tea."); err != nil {
		b.Fatal(err)
	}
	history := make([]engine.UIMessage, 20)
	for i := range history {
		role := engine.RoleUser
		if i%2 == 1 {
			role = engine.RoleAssistant
		}
		history[i] = engine.UIMessage{ID: fmt.Sprint("m", i), Role: role, Parts: []engine.UIPart{{Type: engine.PartText, Text: "A message of about sixty bytes, as a short chat turn has."}}}
	}
	// stored is a chat turn (the session state read from the store);
	// static an OpenAI-compatible turn (the blocks only).
	for _, stored := range []bool{true, false} {
		b.Run(map[bool]string{true: "stored", false: "static"}[stored], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Prepare(ctx, id, history, stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
