package uistream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFollowReplaysThenFollows(t *testing.T) {
	b := NewBuffer()
	first, _ := Frame(map[string]string{"type": "start"})
	b.Append(first)

	rec := httptest.NewRecorder()
	done := make(chan error)
	go func() { done <- b.Follow(context.Background(), rec) }()
	second, _ := Frame(map[string]string{"type": "finish"})
	b.Append(second)
	b.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "data: {\"type\":\"start\"}\n\ndata: {\"type\":\"finish\"}\n\ndata: [DONE]\n\n"
	if rec.Body.String() != want {
		t.Errorf("followed %q, want %q", rec.Body.String(), want)
	}
	// A late follower gets the whole response.
	late := httptest.NewRecorder()
	if err := b.Follow(context.Background(), late); err != nil || late.Body.String() != want {
		t.Errorf("late follower got %q, %v", late.Body.String(), err)
	}
	b.Append(first) // after Close: ignored
	if n := len(b.Frames()); n != 3 {
		t.Errorf("%d frames after close, want 3", n)
	}
}

// End ends a buffer without [DONE]: its followers finish after the last
// frame.
func TestEndWithoutDone(t *testing.T) {
	b := NewBuffer()
	b.Append([]byte("event: message_stop\ndata: {}\n\n"))
	b.End()
	b.Close() // already ended: no [DONE] after all
	rec := httptest.NewRecorder()
	if err := b.Follow(context.Background(), rec); err != nil || rec.Body.String() != "event: message_stop\ndata: {}\n\n" {
		t.Errorf("followed %q, %v", rec.Body.String(), err)
	}
}

// flushRecorder records the body and, on every flush, sends the body
// written so far.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushed chan string
}

func (r flushRecorder) Flush() { r.flushed <- r.Body.String() }

var _ http.Flusher = flushRecorder{}

func TestFollowFlushesOnceCaughtUp(t *testing.T) {
	start, _ := Frame(map[string]string{"type": "start"})
	delta, _ := Frame(map[string]string{"type": "text-delta"})
	b := NewBuffer()
	b.Append(start)
	b.Append(delta)
	rec := flushRecorder{httptest.NewRecorder(), make(chan string, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Follow(ctx, rec) }()

	// The replay is written in one batch and flushed once.
	if got, want := <-rec.flushed, string(start)+string(delta); got != want {
		t.Errorf("first flush sent %q, want %q", got, want)
	}
	// A live frame arriving alone is flushed without waiting for another.
	b.Append(delta)
	if got, want := <-rec.flushed, string(start)+string(delta)+string(delta); got != want {
		t.Errorf("live flush sent %q, want %q", got, want)
	}
	// Live frames appended together are flushed together.
	b.Append(delta, delta)
	if got, want := <-rec.flushed, string(start)+strings.Repeat(string(delta), 4); got != want {
		t.Errorf("batch flush sent %q, want %q", got, want)
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("Follow returned nil after its context was cancelled")
	}
	if len(rec.flushed) != 0 {
		t.Errorf("%d flushes more than the 3 batches", len(rec.flushed))
	}
}

func TestFollowStopsWithContext(t *testing.T) {
	b := NewBuffer()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Follow(ctx, httptest.NewRecorder()); err == nil {
		t.Error("Follow on a cancelled context returned nil")
	}
}

// SetHeaders marks the response as an SSE stream of the UI message stream
// protocol, version 1.
func TestSetHeaders(t *testing.T) {
	h := http.Header{}
	SetHeaders(h)
	if h.Get("X-Vercel-AI-UI-Message-Stream") != "v1" || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		t.Errorf("headers %v", h)
	}
}
