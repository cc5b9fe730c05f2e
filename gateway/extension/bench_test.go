package extension

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
)

// BenchmarkOnChunk measures what an onChunk subscription costs the turn's
// goroutine per stream part: the snapshot and the enqueue (the worker
// batches and sends concurrently; parts it cannot take in time are
// dropped and counted, which costs the same).
func BenchmarkOnChunk(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	set := New([]config.Extension{{Name: "bench", Transport: config.TransportHTTP, URL: srv.URL, Secret: "0123456789abcdef",
		Hooks: []string{HookOnChunk}, Timeout: 5 * time.Second, QueueSize: 1024}}, Options{Logger: slog.New(slog.DiscardHandler)})
	defer set.Close(context.Background())
	h := set.Wrap(engine.NopHooks{})
	c := &engine.ChunkContext{Identity: engine.Identity{RequestID: "req_1", Agent: "demo"},
		Chunk: engine.StreamPart{Type: engine.StreamTextDelta, Text: "Hello, world"}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h.OnChunk(ctx, c)
	}
}
