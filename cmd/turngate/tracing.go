package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/internal/tracing"
)

// tracingShutdownTimeout bounds the export of the last buffered spans at
// shutdown: a collector that does not answer does not hold the exit.
const tracingShutdownTimeout = 5 * time.Second

// startTracing builds the tracer of cfg's tracing section: nil (and a stop
// that does nothing) when tracing is off. stop exports the spans still
// buffered.
func startTracing(cfg config.Tracing, log *slog.Logger) (tracer trace.Tracer, stop func(), err error) {
	if !cfg.Enabled {
		return nil, func() {}, nil
	}
	version := ""
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "(devel)" {
		version = info.Main.Version
	}
	p, err := tracing.New(tracing.Options{Endpoint: cfg.Endpoint, Headers: cfg.Headers, SampleRatio: cfg.Ratio(),
		ServiceName: cfg.ServiceName, ServiceVersion: version})
	if err != nil {
		return nil, nil, err
	}
	// The SDK's own errors (an export the collector refused or never
	// answered) are logged like the gateway's, not by the SDK's logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing: export failed", "err", err) }))
	log.Info("tracing on", "endpoint", cfg.Endpoint, "sampleRatio", cfg.Ratio())
	return p.Tracer(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			log.Warn("tracing: exporting the last spans", "err", err)
		}
	}, nil
}
