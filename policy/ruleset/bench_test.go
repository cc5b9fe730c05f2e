package ruleset

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

// BenchmarkLoad measures building a revision of the shipped rules
// directory: read, hash, compile CEL and Rego.
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, errs := Load("../../rules", Options{}); errs != nil {
			b.Fatal(errs)
		}
	}
}

// BenchmarkHooks measures one hook evaluation through the adapter, record
// included, on the shipped rules.
func BenchmarkHooks(b *testing.B) {
	rev := mustLoad(b, "../../rules", Options{})
	h := rev.Hooks(nil, FailClosed)
	ctx := context.Background()
	b.Run("beforeTurn", func(b *testing.B) {
		tc := &engine.TurnContext{Identity: identity, MaxSteps: 50, Continuation: true}
		for b.Loop() {
			if _, err := h.BeforeTurn(ctx, tc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("beforeToolCall", func(b *testing.B) {
		tc := toolCall("search", `{"query": "go", "limit": 500}`, map[string]any{"mode": "read-only"})
		for b.Loop() {
			if _, err := h.BeforeToolCall(ctx, tc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("toolResult", func(b *testing.B) {
		rc := toolResult("search", `{"hits": [{"title": "a"}, {"title": "b"}], "token": "t"}`)
		for b.Loop() {
			if _, err := h.ToolResult(ctx, rc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReloadLatency measures file write → new revision serving through
// Watch (fsnotify, debounce, rebuild, swap), for two debounce windows.
func BenchmarkReloadLatency(b *testing.B) {
	for _, debounce := range []time.Duration{10 * time.Millisecond, DefaultDebounce} {
		b.Run("debounce="+debounce.String(), func(b *testing.B) {
			dir := rulesDir(b, defaultSet())
			swapped := make(chan struct{}, 1)
			m, err := NewManager(dir, Options{PollInterval: -1, Debounce: debounce, OnReload: func(result string, _ error) {
				if result == ReloadSuccess {
					swapped <- struct{}{}
				}
			}}, quiet)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() { _ = m.Watch(ctx) }()
			for i := 0; b.Loop(); i++ {
				data := celTurn + "# edit " + strconv.Itoa(i) + "\n"
				// Rename over, so the watcher never sees a half-written file.
				tmp := filepath.Join(dir, ".edit.tmp")
				if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
					b.Fatal(err)
				}
				if err := os.Rename(tmp, filepath.Join(dir, "10-turn.yaml")); err != nil {
					b.Fatal(err)
				}
				select {
				case <-swapped:
				case <-time.After(waitTimeout):
					b.Fatal("timed out waiting for the reload")
				}
			}
		})
	}
}
