// Package otlptest is an in-process OTLP/HTTP trace receiver for tests and
// the tracing example's stand-in collector: it decodes the protobuf export
// requests an OpenTelemetry SDK posts to /v1/traces into flat spans.
package otlptest

import (
	"encoding/hex"
	"io"
	"net/http"
	"slices"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// MaxExportBytes bounds one export request's body.
const MaxExportBytes = 16 << 20

// Span is one received span, flattened. Attribute values are string,
// int64, bool, float64 or []any of those.
type Span struct {
	Name         string         `json:"name"`
	TraceID      string         `json:"traceId"`
	SpanID       string         `json:"spanId"`
	ParentSpanID string         `json:"parentSpanId,omitempty"`
	Service      string         `json:"service"`
	Attributes   map[string]any `json:"attributes"`
	Events       []Event        `json:"events,omitempty"`
}

// Event is one span event.
type Event struct {
	Name       string         `json:"name"`
	Attributes map[string]any `json:"attributes"`
}

// Receiver is an http.Handler accepting OTLP/HTTP protobuf trace exports
// on POST /v1/traces. It is safe for concurrent use.
type Receiver struct {
	// OnSpan, if set, is called with each span as it arrives (under the
	// receiver's lock, so calls never overlap).
	OnSpan func(Span)

	mu      sync.Mutex
	spans   []Span
	headers []http.Header
}

// ServeHTTP decodes one export request.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "OTLP/HTTP traces are POSTed to /v1/traces", http.StatusNotFound)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, "content type "+ct+": only application/x-protobuf is accepted", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxExportBytes))
	var export collectortrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &export)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.headers = append(r.headers, req.Header.Clone())
	for _, rs := range export.ResourceSpans {
		service, _ := attributes(rs.GetResource().GetAttributes())["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentSpanID: hex.EncodeToString(s.ParentSpanId), Service: service, Attributes: attributes(s.Attributes)}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, Event{Name: e.Name, Attributes: attributes(e.Attributes)})
				}
				r.spans = append(r.spans, sp)
				if r.OnSpan != nil {
					r.OnSpan(sp)
				}
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans returns the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Headers returns the headers of each export request received so far.
func (r *Receiver) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.headers)
}

// attributes flattens OTLP attributes.
func attributes(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = value(kv.Value)
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		out := make([]any, 0, len(x.ArrayValue.Values))
		for _, e := range x.ArrayValue.Values {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}
