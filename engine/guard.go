package engine

import (
	"context"
	"errors"
	"fmt"
)

// A model provider is code the engine does not control (an SDK, a
// configured plug-in). These guards turn its panics into errors, so a
// broken provider fails one turn with status error instead of crashing the
// process.

// resolve resolves a model name, recovering a panicking resolver.
func (t *turn) resolve(model string) (p Provider, upstream string, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, upstream, err = nil, "", fmt.Errorf("resolving model %q: model resolver panicked: %v", model, r)
		}
	}()
	p, upstream, err = t.e.opts.Models.Resolve(model)
	if err != nil {
		return nil, "", fmt.Errorf("resolving model %q: %w", model, err)
	}
	if p == nil {
		return nil, "", fmt.Errorf("resolving model %q: the resolver returned no provider", model)
	}
	return p, upstream, nil
}

// startStream starts a model stream, recovering a panicking provider, and
// returns it wrapped in the turn's guardedStream.
func (t *turn) startStream(ctx context.Context, prov Provider, req *ModelRequest) (s Stream, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("model provider panicked in Stream: %v", r)
		}
	}()
	s, err = prov.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, errors.New("provider returned neither a stream nor an error")
	}
	t.stream = guardedStream{s: s}
	return &t.stream, nil
}

// guardedStream wraps a provider's Stream: a panic in any method ends the
// stream with an error (Err reports it) instead of unwinding the turn. It
// reads Current inside Next, so one recovery covers both. A turn reuses
// one guardedStream for its steps (only one stream is open at a time).
type guardedStream struct {
	s   Stream
	cur StreamPart
	err error
}

func (g *guardedStream) Next() (ok bool) {
	if g.err != nil {
		return false
	}
	defer g.recoverPanic("Next/Current")
	if !g.s.Next() {
		return false
	}
	g.cur = g.s.Current()
	return true
}

func (g *guardedStream) Current() StreamPart { return g.cur }

func (g *guardedStream) Err() (err error) {
	if g.err != nil {
		return g.err
	}
	defer func() {
		if r := recover(); r != nil {
			g.err = fmt.Errorf("model provider panicked in Err: %v", r)
			err = g.err
		}
	}()
	return g.s.Err()
}

func (g *guardedStream) Close() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("model provider panicked in Close: %v", r)
		}
	}()
	return g.s.Close()
}

// recoverPanic records a panic as the stream's error. It must be deferred
// directly.
func (g *guardedStream) recoverPanic(method string) {
	if r := recover(); r != nil {
		g.err = fmt.Errorf("model provider panicked in %s: %v", method, r)
	}
}
