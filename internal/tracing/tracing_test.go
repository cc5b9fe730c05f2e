package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

const validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestEndpointURL(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{in: "http://localhost:4318", want: "http://localhost:4318/v1/traces"},
		{in: "http://localhost:4318/", want: "http://localhost:4318/v1/traces"},
		{in: "https://otel.example.com/custom/path", want: "https://otel.example.com/custom/path"},
		{in: "", err: "no endpoint"},
		{in: "localhost:4318", err: "scheme must be http or https"},
		{in: "grpc://c:4317", err: "scheme must be http or https"},
		{in: "http:///v1/traces", err: "no host"},
		{in: "http://user:pw@c:4318", err: "credentials, query and fragment are not allowed"},
		{in: "http://c:4318/v1/traces?x=1", err: "credentials, query and fragment are not allowed"},
		{in: "http://c:4318/%zz", err: "invalid URL escape"},
	}
	for _, tc := range tests {
		got, err := EndpointURL(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("EndpointURL(%q) error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("EndpointURL(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCarrierRoundTrip(t *testing.T) {
	h := http.Header{"Traceparent": {validParent}, "Tracestate": {"vendor=opaque"}}
	ctx := Extract(context.Background(), h)
	c := Save(ctx)
	if c.TraceParent != validParent || c.TraceState != "vendor=opaque" {
		t.Fatalf("Save = %+v", c)
	}
	got := trace.SpanContextFromContext(c.Restore(context.Background()))
	if !got.Equal(trace.SpanContextFromContext(ctx)) || !got.IsRemote() {
		t.Errorf("Restore = %v, want the saved remote span context", got)
	}
	if c := Save(context.Background()); c != (Carrier{}) {
		t.Errorf("Save without a span = %+v, want empty", c)
	}
	for _, bad := range []Carrier{{}, {TraceParent: "garbage"}, {TraceParent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}} {
		if sc := trace.SpanContextFromContext(bad.Restore(context.Background())); sc.IsValid() {
			t.Errorf("Restore(%+v) = %v, want no span context", bad, sc)
		}
	}
}

func TestFollow(t *testing.T) {
	req := Extract(context.Background(), http.Header{"Traceparent": {validParent}})
	base, cancel := context.WithCancel(context.Background())
	ctx := Follow(base, req)
	if !trace.SpanContextFromContext(ctx).Equal(trace.SpanContextFromContext(req)) {
		t.Error("Follow lost the span context")
	}
	cancel()
	if ctx.Err() == nil {
		t.Error("Follow detached the context from its own cancellation")
	}
	if Follow(base, context.Background()) != base {
		t.Error("Follow without a span context must return the context as is")
	}
}

// TestTransport checks that the wrapper sends the context's trace context
// without touching the caller's request, and sends nothing without one.
func TestTransport(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("traceparent"))
	}))
	defer srv.Close()
	client := Client(nil)
	if client == http.DefaultClient || Client(client).Transport != client.Transport {
		t.Fatal("Client must copy the client and wrap its transport once")
	}
	traced := Extract(context.Background(), http.Header{"Traceparent": {validParent}})
	for _, ctx := range []context.Context{traced, context.Background()} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if len(req.Header) != 0 {
			t.Errorf("the caller's request was modified: %v", req.Header)
		}
	}
	if len(got) != 2 || got[0] != validParent || got[1] != "" {
		t.Errorf("server saw traceparents %q, want the traced one then none", got)
	}
}

// FuzzExtract feeds untrusted traceparent/tracestate headers: Extract
// never fails or panics, and a context it accepts saves and restores to
// the same span context.
func FuzzExtract(f *testing.F) {
	f.Add(validParent, "vendor=opaque")
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=b,c=d")
	f.Add("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "=,=")
	f.Add(strings.Repeat("0", 55), strings.Repeat("k=v,", 40))
	f.Fuzz(func(t *testing.T, parent, state string) {
		h := http.Header{}
		h.Set("traceparent", parent)
		h.Set("tracestate", state)
		ctx := Extract(context.Background(), h)
		sc := trace.SpanContextFromContext(ctx)
		if !sc.IsValid() {
			return
		}
		back := trace.SpanContextFromContext(Save(ctx).Restore(context.Background()))
		if !back.Equal(sc) {
			t.Errorf("saved and restored %v, want %v", back, sc)
		}
	})
}
