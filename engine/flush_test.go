package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
)

// flushWatch counts the events emitted since TurnRequest.Flush was last
// called, and records a violation whenever the turn waits (on the model or
// a tool) with events still unflushed.
type flushWatch struct {
	mu         sync.Mutex
	unflushed  int
	events     int
	batches    int
	violations []string
}

func (w *flushWatch) emit(engine.Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unflushed++
	w.events++
}

func (w *flushWatch) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unflushed > 0 {
		w.batches++
	}
	w.unflushed = 0
}

// waiting records a violation when events are pending at a wait.
func (w *flushWatch) waiting(what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unflushed > 0 {
		w.violations = append(w.violations, fmt.Sprintf("%s with %d events unflushed", what, w.unflushed))
	}
}

// watchedProvider checks the watch whenever the model is asked to open a
// stream or for its next part.
type watchedProvider struct {
	engine.Provider
	w *flushWatch
}

func (p watchedProvider) Stream(ctx context.Context, req *engine.ModelRequest) (engine.Stream, error) {
	p.w.waiting("model stream opened")
	s, err := p.Provider.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	return watchedStream{s, p.w}, nil
}

type watchedStream struct {
	engine.Stream
	w *flushWatch
}

func (s watchedStream) Next() bool {
	s.w.waiting("model asked for its next part")
	return s.Stream.Next()
}

// TestFlushBeforeEveryWait checks TurnRequest.Flush's contract on a turn
// with a tool step, a failing tool and a text step: no event is left
// unflushed while the turn waits for the model or a tool, or when Run
// returns, and events that come together are flushed together.
func TestFlushBeforeEveryWait(t *testing.T) {
	w := &flushWatch{}
	fake := newFake(callStep(`A={"q":"a"}`, `B={"q":"b"}`), textStep("all done"))
	h := newHarness(t, fake)
	h.eng = engine.New(engine.Options{Models: models{"m": watchedProvider{fake, w}}, Logger: quiet})
	tool := func(name string, fail bool) engine.Tool {
		tl := echoTool(name)
		inner := tl.Executor
		tl.Executor = engine.ExecutorFunc(func(ctx context.Context, c engine.ToolExecution) (json.RawMessage, error) {
			w.waiting("tool " + c.ToolName + " executed")
			if fail {
				return nil, fmt.Errorf("tool %s failed", c.ToolName)
			}
			return inner.Execute(ctx, c)
		})
		return tl
	}
	h.req.Tools = []engine.Tool{tool("A", false), tool("B", true)}
	h.req.Emit, h.req.Flush = w.emit, w.flush
	res := h.run(context.Background())
	if res.Status != engine.StatusCompleted {
		t.Fatalf("status = %s (%s)", res.Status, res.Error)
	}
	w.waiting("Run returned")
	for _, v := range w.violations {
		t.Error(v)
	}
	if w.batches == 0 || w.batches >= w.events {
		t.Errorf("%d events in %d batches: want them grouped", w.events, w.batches)
	}
}
