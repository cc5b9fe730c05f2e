package anthropic_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/anthropic"
)

// TestStreamCarriesTraceContext checks that a request sends the W3C trace
// context of its context (the model call's span when the turn is traced).
func TestStreamCarriesTraceContext(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("traceparent")
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"stop here"}}`, http.StatusBadRequest)
	}))
	defer srv.Close()
	p := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "k"})
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	if _, err := p.Stream(ctx, &engine.ModelRequest{Model: "claude", Messages: []engine.ModelMessage{{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentText, Text: "hi"}}}}}); err == nil {
		t.Fatal("want the server's 400")
	}
	if h := <-got; h != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("traceparent %q, want the context's", h)
	}
}
