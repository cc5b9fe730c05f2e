// Package uistream writes the AI SDK UI message stream (SSE, protocols.md
// A.3) and keeps every in-flight turn's encoded chunks so that a
// reconnecting client can replay the whole response from its first chunk
// and then follow it live (A.10).
package uistream

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// SetHeaders sets the five UI message stream response headers; the
// protocol's Cache-Control no-cache gets no-store beside it, as every API
// response of the gateway has (httpguard).
func SetHeaders(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-store")
	h.Set("Connection", "keep-alive")
	h.Set("X-Vercel-AI-UI-Message-Stream", "v1")
	h.Set("X-Accel-Buffering", "no")
}

// Done is the stream's terminating SSE event.
var Done = []byte("data: [DONE]\n\n")

// Buffer holds one response's SSE frames, appended by the turn and read by
// any number of followers. It is safe for concurrent use.
type Buffer struct {
	mu     sync.Mutex
	frames [][]byte
	closed bool
	// wake is closed when a frame is appended or the buffer is closed,
	// and replaced on Append only if a follower took it since (waited), so
	// appending while every follower is busy writing allocates nothing.
	wake   chan struct{}
	waited bool
}

// NewBuffer returns an empty, open Buffer.
func NewBuffer() *Buffer { return &Buffer{wake: make(chan struct{})} }

// Append adds frames in order and wakes the followers once, so frames
// appended together are written together. Appending to a closed buffer does
// nothing.
func (b *Buffer) Append(frames ...[]byte) {
	if len(frames) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.frames = append(b.frames, frames...)
	if b.waited {
		close(b.wake)
		b.wake = make(chan struct{})
		b.waited = false
	}
}

// Close appends the [DONE] frame and ends the buffer; followers finish.
func (b *Buffer) Close() { b.end(Done) }

// End ends the buffer without a [DONE] frame, for a protocol whose stream
// has none (Anthropic's ends with its message_stop event); followers
// finish.
func (b *Buffer) End() { b.end(nil) }

func (b *Buffer) end(last []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if last != nil {
		b.frames = append(b.frames, last)
	}
	b.closed = true
	close(b.wake)
}

// Closed reports whether the buffer has ended.
func (b *Buffer) Closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Frames returns a copy of the frames so far.
func (b *Buffer) Frames() [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([][]byte(nil), b.frames...)
}

// next returns the frames from index i on, whether the buffer is closed,
// and a channel that is closed when more arrive.
func (b *Buffer) next(i int) ([][]byte, bool, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waited = true
	return b.frames[i:], b.closed, b.wake
}

// Follow writes every frame from the first one, then each new frame as it
// arrives, until the buffer is closed or ctx is done. It flushes once it
// has caught up: frames that arrive while it writes are written in the
// same batch, and a frame arriving alone is flushed at once. A write error
// (the client went away) ends it with that error; the turn behind the
// buffer is unaffected.
func (b *Buffer) Follow(ctx context.Context, w http.ResponseWriter) error {
	flusher, _ := w.(http.Flusher)
	unflushed := false
	return b.Walk(ctx, 0, func(frames [][]byte, closed bool) error {
		for _, f := range frames {
			if _, err := w.Write(f); err != nil {
				return fmt.Errorf("writing stream: %w", err)
			}
		}
		if len(frames) > 0 && !closed {
			// More may have arrived while writing: flush once caught up.
			unflushed = true
			return nil
		}
		if (unflushed || len(frames) > 0) && flusher != nil {
			flusher.Flush()
		}
		unflushed = false
		return nil
	})
}

// Walk calls fn with the frames from index from on, batch by batch as they
// are appended, until the buffer is closed or ctx is done; the last call
// has closed set (and ends with the [DONE] frame when Close ended the
// buffer). A call with no frames
// means fn has caught up and Walk is about to wait. An error of fn ends
// the walk with it; the turn behind the buffer is unaffected.
func (b *Buffer) Walk(ctx context.Context, from int, fn func(frames [][]byte, closed bool) error) error {
	i := from
	for {
		frames, closed, wake := b.next(i)
		if err := fn(frames, closed); err != nil {
			return err
		}
		i += len(frames)
		if closed {
			return nil
		}
		if len(frames) > 0 {
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Len returns the number of frames so far.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.frames)
}
