package engine_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
	"github.com/turngate/turngate/internal/tracing"
)

// BenchmarkTurnTracing measures what tracing costs a turn (weatherTurn: 2
// steps, 1 tool call, so 5 spans): off, the engine has no tracer and must
// match BenchmarkTurn; on, every turn is sampled and its spans go through
// the SDK's batch processor to an in-memory exporter (the OTLP exporter's
// network cost is not the turn's: it runs on the batcher's goroutine).
func BenchmarkTurnTracing(b *testing.B) {
	run := func(b *testing.B, opts engine.Options) {
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
	b.Run("off", func(b *testing.B) { run(b, engine.Options{}) })
	b.Run("on", func(b *testing.B) {
		exp := tracetest.NewInMemoryExporter()
		p, err := tracing.New(tracing.Options{Exporter: exp, SampleRatio: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Shutdown(context.Background())
		run(b, engine.Options{Tracer: p.Tracer()})
		b.StopTimer()
		if err := p.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		if n := len(exp.GetSpans()); n < 5 {
			b.Fatalf("%d spans exported, want at least 5 per turn", n)
		}
	})
}
