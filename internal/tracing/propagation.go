package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator reads and writes the W3C trace context headers (traceparent,
// tracestate) only: turngate does not forward baggage.
var propagator = propagation.TraceContext{}

// Extract returns ctx with the trace context of an incoming request's
// headers. A missing or malformed traceparent is ignored (the turn starts
// a new trace); it is never an error.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Follow returns to carrying the span context of from, for work that
// outlives the request it came with (a turn runs on a context detached
// from its request's). to is returned as is when from has none.
func Follow(to, from context.Context) context.Context {
	sc := trace.SpanContextFromContext(from)
	if !sc.IsValid() {
		return to
	}
	return trace.ContextWithSpanContext(to, sc)
}

// Carrier is a trace context in its W3C header form, for storing with
// work that runs later (a durable submission).
type Carrier struct {
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// Save returns ctx's trace context as a Carrier; it is empty when ctx has
// none.
func Save(ctx context.Context) Carrier {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return Carrier{}
	}
	h := http.Header{}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
	return Carrier{TraceParent: h.Get("traceparent"), TraceState: h.Get("tracestate")}
}

// Restore returns ctx with the saved trace context; an empty or malformed
// one leaves ctx as is.
func (c Carrier) Restore(ctx context.Context) context.Context {
	if c.TraceParent == "" {
		return ctx
	}
	h := http.Header{"Traceparent": {c.TraceParent}}
	if c.TraceState != "" {
		h.Set("tracestate", c.TraceState)
	}
	return Extract(ctx, h)
}

// Transport returns base (http.DefaultTransport when nil) sending the
// trace context of each request's context as traceparent and tracestate
// headers. A request whose context has no span goes out unchanged, so the
// wrapper costs one context lookup when tracing is off.
//
// Every outgoing HTTP client of a turn is wrapped here: the model
// providers, HTTP tools, MCP servers over HTTP and http extensions
// (extension.NewHTTPClient).
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if _, ok := base.(transport); ok {
		return base
	}
	return transport{base: base}
}

// Client returns a copy of c (http.DefaultClient when nil) whose transport
// is wrapped by Transport.
func Client(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	out := *c
	out.Transport = Transport(c.Transport)
	return &out
}

type transport struct {
	base http.RoundTripper
}

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not modify the caller's request.
	out := req.Clone(ctx)
	propagator.Inject(ctx, propagation.HeaderCarrier(out.Header))
	return t.base.RoundTrip(out)
}
