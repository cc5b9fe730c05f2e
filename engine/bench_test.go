package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
)

// weatherTurn is the benchmarks' turn for the embedded scripted model: the
// model calls the weather tool, then answers from its result (two steps,
// one tool execution), with NopHooks and events discarded.
func weatherTurn() *engine.TurnRequest {
	weather := engine.Tool{
		ToolInfo: engine.ToolInfo{Name: "weather", Kind: engine.ToolKindBuiltin,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)},
		Executor: engine.ExecutorFunc(func(context.Context, engine.ToolExecution) (json.RawMessage, error) {
			return json.RawMessage(`{"weather":"sunny"}`), nil
		}),
	}
	return &engine.TurnRequest{
		Identity:  engine.Identity{RequestID: "bench", SessionID: "s", Agent: "a", EntryPath: engine.EntryChat},
		Model:     "scripted",
		Messages:  []engine.UIMessage{userMsg("What is the weather in Paris?")},
		Tools:     []engine.Tool{weather},
		MessageID: "msg_bench",
		Hooks:     engine.NopHooks{},
		Emit:      func(engine.Event) {},
	}
}

// checkWeatherTurn fails b unless req runs as weatherTurn describes.
func checkWeatherTurn(b *testing.B, eng *engine.Engine, req *engine.TurnRequest) {
	b.Helper()
	res := eng.Run(context.Background(), req)
	if res.Status != engine.StatusCompleted || len(res.Steps) != 2 || len(res.Steps[0].ToolCalls) != 1 {
		b.Fatalf("turn: status %s, %d steps, error %q", res.Status, len(res.Steps), res.Error)
	}
}

// BenchmarkTurn measures the engine's overhead for one turn of the embedded
// scripted model (weatherTurn).
func BenchmarkTurn(b *testing.B) { benchWeatherTurn(b, engine.Options{}) }

// benchWeatherTurn runs weatherTurn on an engine with opts and the
// embedded scripted model.
func benchWeatherTurn(b *testing.B, opts engine.Options) {
	opts.Models, opts.Logger = models{"scripted": scripted.Default()}, quiet
	eng := engine.New(opts)
	req := weatherTurn()
	checkWeatherTurn(b, eng, req)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		eng.Run(ctx, req)
	}
}
