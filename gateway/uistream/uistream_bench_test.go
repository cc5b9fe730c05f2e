package uistream

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/turngate/turngate/engine"
)

// benchEvents are the chunks a turn streams most, as the engine emits them.
var benchEvents = []struct {
	name string
	ev   engine.Event
}{
	{"text-delta", engine.Event{Type: "text-delta", ID: "text_0", Delta: "The gateway rela"}},
	{"tool-input-available", engine.Event{Type: "tool-input-available", ToolCallID: "call_0_0", ToolName: "weather",
		Input: json.RawMessage(`{"city":"Paris"}`)}},
	{"tool-output-available", engine.Event{Type: "tool-output-available", ToolCallID: "call_0_0",
		Output: json.RawMessage(`{"city":"Paris","tempC":21,"weather":"sunny"}`)}},
}

// BenchmarkFrame measures encoding one UI message stream chunk as an SSE
// event.
func BenchmarkFrame(b *testing.B) {
	for _, bc := range benchEvents {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Frame(bc.ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventFrame measures encoding one chunk as the engine's Emit
// callback can: the Event passed by value, not boxed in an interface.
func BenchmarkEventFrame(b *testing.B) {
	for _, bc := range benchEvents {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := EventFrame(bc.ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAppendFrame measures the encoding alone, into a reused buffer.
func BenchmarkAppendFrame(b *testing.B) {
	for _, bc := range benchEvents {
		b.Run(bc.name, func(b *testing.B) {
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = AppendFrame(buf[:0], bc.ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// discardWriter is a flushable http.ResponseWriter that drops the body
// and counts flushes (each one is a write syscall in the gateway).
type discardWriter struct {
	h       http.Header
	flushes int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      { w.flushes++ }

// BenchmarkRelayChunk measures relaying one text-delta chunk: encoding it,
// appending it to the response's Buffer and a following client's write,
// which runs in its own goroutine as in the gateway. flushes/op is the
// share of chunks that cost the follower a flush.
func BenchmarkRelayChunk(b *testing.B) {
	ev := benchEvents[0].ev
	buf := NewBuffer()
	w := &discardWriter{h: http.Header{}}
	done := make(chan error, 1)
	go func() { done <- buf.Follow(context.Background(), w) }()
	b.ReportAllocs()
	for b.Loop() {
		f, err := Frame(ev)
		if err != nil {
			b.Fatal(err)
		}
		buf.Append(f)
	}
	buf.Close()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(w.flushes)/float64(b.N), "flushes/op")
}
