package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
)

// BenchmarkTurnChunks measures BenchmarkTurn's turn (weatherTurn) streamed
// in chunks of different sizes, to separate the per-turn cost from the
// per-chunk cost: the difference in ns/op between
// two sizes divided by the difference in chunks/turn is what the engine
// spends relaying one more chunk.
func BenchmarkTurnChunks(b *testing.B) {
	// chunkSize 1000 streams every text and tool input in one chunk;
	// chunkSize 1 streams a chunk per character.
	for _, size := range []int{1000, 16, 4, 1} {
		b.Run(fmt.Sprintf("chunkSize=%d", size), func(b *testing.B) {
			eng := engine.New(engine.Options{Models: models{"scripted": scripted.Default(scripted.WithChunkSize(size))}, Logger: quiet})
			chunks := 0
			req := weatherTurn()
			req.Emit = func(ev engine.Event) {
				if ev.Type == engine.EventTextDelta || ev.Type == engine.EventToolInputDelta {
					chunks++
				}
			}
			checkWeatherTurn(b, eng, req)
			ctx := context.Background()
			perTurn := chunks
			req.Emit = func(engine.Event) {}
			b.ReportAllocs()
			for b.Loop() {
				eng.Run(ctx, req)
			}
			b.ReportMetric(float64(perTurn), "chunks/turn")
		})
	}
}
