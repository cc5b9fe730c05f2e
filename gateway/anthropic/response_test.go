package anthropic

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

// TestKeepAlive: once message_start is out, a silent stream gets ping
// events, and KeepAlive returns when the stream ends; a non-streaming
// encoder gets none.
func TestKeepAlive(t *testing.T) {
	e := NewEncoder("msg_1", "demo", true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.KeepAlive(context.Background(), time.Millisecond)
	}()
	e.Event(engine.Event{Type: engine.EventStart})
	deadline := time.Now().Add(time.Minute)
	for e.buf.Len() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no idle ping: %q", e.buf.Frames())
		}
		time.Sleep(time.Millisecond)
	}
	e.End(&engine.TurnResult{FinishReason: engine.FinishStop}, "")
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("KeepAlive did not return after the stream ended")
	}
	frames := e.buf.Frames()
	for i, want := range []string{"message_start", "ping", "ping"} {
		if !strings.HasPrefix(string(frames[i]), "event: "+want+"\n") {
			t.Errorf("frame %d = %q, want %s", i, frames[i], want)
		}
	}
	if last := string(frames[len(frames)-1]); !strings.HasPrefix(last, "event: message_stop\n") {
		t.Errorf("last frame %q, want message_stop", last)
	}

	quiet := NewEncoder("msg_2", "demo", false)
	quiet.Event(engine.Event{Type: engine.EventStart})
	quiet.KeepAlive(context.Background(), time.Millisecond) // returns at once
	if n := quiet.buf.Len(); n != 0 {
		t.Errorf("a non-streaming encoder holds %d frames", n)
	}
}
