package mcptool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/mcptool"
)

// TestCallCarriesTraceContext checks that a tool call over streamable HTTP
// sends the W3C trace context of the call's context (its execute_tool span
// when the turn is traced), and that a call without one sends none.
func TestCallCarriesTraceContext(t *testing.T) {
	var mu sync.Mutex
	var calls []string // the traceparent of each tools/call request
	mcpServer := newTestServer("v1")
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
			mu.Lock()
			calls = append(calls, r.Header.Get("traceparent"))
			mu.Unlock()
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.URL})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	greet := find(t, m.Tools(), "test_greet")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	for _, ctx := range []context.Context{trace.ContextWithSpanContext(context.Background(), sc), context.Background()} {
		if _, err := greet.Executor.Execute(ctx, engine.ToolExecution{ToolName: greet.Name, Input: json.RawMessage(`{"name":"Ada"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""}
	if !slices.Equal(calls, want) {
		t.Errorf("tools/call traceparents %q, want %q", calls, want)
	}
}
