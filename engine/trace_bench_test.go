package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/tracing"
)

// countingExporter is an in-memory span exporter that keeps only a count,
// so a long benchmark does not grow the heap.
type countingExporter struct{ spans atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

// BenchmarkTurnTracing measures what tracing costs a turn (weatherTurn: 2
// steps, 1 tool call, so 5 spans): off, the engine has no tracer and must
// match BenchmarkTurn; on, every turn is sampled and its spans go through
// the SDK's batch processor (as turngate serve configures it) to an
// in-memory exporter (the OTLP exporter's encoding and network cost runs on
// the batcher's goroutine, off the turn's path).
func BenchmarkTurnTracing(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchWeatherTurn(b, engine.Options{}) })
	b.Run("on", func(b *testing.B) {
		exp := &countingExporter{}
		p, err := tracing.New(tracing.Options{Exporter: exp, SampleRatio: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Shutdown(context.Background())
		benchWeatherTurn(b, engine.Options{Tracer: p.Tracer()})
		b.StopTimer()
		if err := p.ForceFlush(context.Background()); err != nil {
			b.Fatal(err)
		}
		if n := exp.spans.Load(); n < 5 {
			b.Fatalf("%d spans exported, want at least 5 per turn", n)
		}
	})
}
