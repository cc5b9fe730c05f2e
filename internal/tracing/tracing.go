// Package tracing is turngate's OpenTelemetry wiring: the tracer provider
// built from the `tracing` configuration (an OTLP/HTTP exporter and a
// ratio sampler), the W3C trace context (traceparent, tracestate) taken
// from incoming requests and sent with outgoing ones, and the policy
// decisions recorded as span events.
//
// The engine opens the spans themselves (engine/trace.go) with the
// OpenTelemetry API; this package is everything around them. When tracing
// is off nothing here runs on a turn's path but a context lookup in
// Transport and Decision.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationName names the tracer of turngate's spans.
const InstrumentationName = "github.com/turngate/turngate"

// DefaultServiceName is service.name when the configuration sets none.
const DefaultServiceName = "turngate"

// TracesPath is the OTLP/HTTP traces path, added to an endpoint given
// without a path.
const TracesPath = "/v1/traces"

// Options configure a Provider.
type Options struct {
	// Endpoint is the OTLP/HTTP collector URL (http or https). Without a
	// path, TracesPath is used.
	Endpoint string
	// Headers are sent with every export (e.g. an authorization header).
	Headers map[string]string
	// SampleRatio is the fraction of new traces sampled (0 to 1). A trace
	// started by an incoming traceparent follows that parent's sampled
	// flag.
	SampleRatio float64
	// ServiceName is the resource's service.name (default DefaultServiceName).
	ServiceName string
	// ServiceVersion is the resource's service.version, if known.
	ServiceVersion string
	// Exporter replaces the OTLP exporter (tests and benchmarks use an
	// in-memory one); Endpoint and Headers are then ignored.
	Exporter sdktrace.SpanExporter
	// Synchronous exports each span as it ends instead of in batches
	// (tests).
	Synchronous bool
}

// Provider owns the OpenTelemetry SDK's tracer provider and its exporter.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// New builds a Provider for opts. It does not contact the collector: an
// unreachable one makes exports fail later (the SDK logs them), never a
// turn.
func New(opts Options) (*Provider, error) {
	exp := opts.Exporter
	if exp == nil {
		endpoint, err := EndpointURL(opts.Endpoint)
		if err != nil {
			return nil, err
		}
		httpOpts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
		if len(opts.Headers) > 0 {
			httpOpts = append(httpOpts, otlptracehttp.WithHeaders(opts.Headers))
		}
		if exp, err = otlptracehttp.New(context.Background(), httpOpts...); err != nil {
			return nil, fmt.Errorf("tracing: creating the OTLP exporter: %w", err)
		}
	}
	name := opts.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(name))}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(opts.ServiceVersion)))
	}
	res, err := resource.New(context.Background(), attrs...)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	export := sdktrace.WithBatcher(exp)
	if opts.Synchronous {
		export = sdktrace.WithSyncer(exp)
	}
	tp := sdktrace.NewTracerProvider(export, sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(opts.SampleRatio))))
	return &Provider{tp: tp}, nil
}

// Tracer returns the tracer of turngate's spans.
func (p *Provider) Tracer() trace.Tracer { return p.tp.Tracer(InstrumentationName) }

// ForceFlush exports the spans buffered so far; ctx bounds the wait.
func (p *Provider) ForceFlush(ctx context.Context) error { return p.tp.ForceFlush(ctx) }

// Shutdown exports the spans still buffered and stops the exporter; ctx
// bounds the wait.
func (p *Provider) Shutdown(ctx context.Context) error { return p.tp.Shutdown(ctx) }

// EndpointURL checks an OTLP/HTTP endpoint and returns the traces URL it
// names: an http or https URL with a host, TracesPath added when it has
// no path.
func EndpointURL(endpoint string) (string, error) {
	if endpoint == "" {
		return "", errors.New("no endpoint (an OTLP/HTTP URL such as http://localhost:4318)")
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("endpoint %q: the scheme must be http or https", endpoint)
	}
	if u.Host == "" {
		return "", fmt.Errorf("endpoint %q: no host", endpoint)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("endpoint %q: credentials, query and fragment are not allowed (send credentials in tracing.headers)", endpoint)
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = TracesPath
	}
	return u.String(), nil
}
