package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
)

// BenchmarkTurnChunks measures BenchmarkTurn's turn (two steps, one weather
// call, NopHooks) streamed in chunks of different sizes, to separate the
// per-turn cost from the per-chunk cost: the difference in ns/op between
// two sizes divided by the difference in chunks/turn is what the engine
// spends relaying one more chunk.
func BenchmarkTurnChunks(b *testing.B) {
	weather := engine.Tool{
		ToolInfo: engine.ToolInfo{Name: "weather", Kind: engine.ToolKindBuiltin,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		Executor: engine.ExecutorFunc(func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
			return json.RawMessage(`{"weather":"sunny"}`), nil
		}),
	}
	// chunkSize 1000 streams every text and tool input in one chunk;
	// chunkSize 1 streams a chunk per character.
	for _, size := range []int{1000, 16, 4, 1} {
		b.Run(fmt.Sprintf("chunkSize=%d", size), func(b *testing.B) {
			eng := engine.New(engine.Options{Models: models{"scripted": scripted.Default(scripted.WithChunkSize(size))}, Logger: quiet})
			chunks := 0
			req := &engine.TurnRequest{
				Identity:  engine.Identity{RequestID: "bench", SessionID: "s", Agent: "a", EntryPath: engine.EntryChat},
				Model:     "scripted",
				Messages:  []engine.UIMessage{userMsg("What is the weather in Paris?")},
				Tools:     []engine.Tool{weather},
				MessageID: "msg_bench",
				Hooks:     engine.NopHooks{},
				Emit: func(ev engine.Event) {
					if ev.Type == "text-delta" || ev.Type == "tool-input-delta" {
						chunks++
					}
				},
			}
			ctx := context.Background()
			if res := eng.Run(ctx, req); res.Status != engine.StatusCompleted || len(res.Steps) != 2 {
				b.Fatalf("turn: status %s, %d steps, error %q", res.Status, len(res.Steps), res.Error)
			}
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
