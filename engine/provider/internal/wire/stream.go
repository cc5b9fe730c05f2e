package wire

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/turngate/turngate/engine"
)

// Handler turns a provider's events into stream parts.
type Handler interface {
	// Event handles one event, emitting zero or more parts. It returns
	// done when the event ends the stream, or an error that ends it.
	Event(ev Event, emit func(engine.StreamPart)) (done bool, err error)
	// End is called when the body ends before an event said done: it
	// emits the closing parts of a complete stream, or reports truncation.
	End(emit func(engine.StreamPart)) error
}

// Stream is an engine.Stream over an SSE response body.
type Stream struct {
	ctx     context.Context
	body    io.ReadCloser
	dec     *Decoder
	handler Handler

	queue []engine.StreamPart
	cur   engine.StreamPart
	err   error
	ended bool

	closeOnce sync.Once
	closed    atomic.Bool
}

// NewStream returns a Stream reading body (a *Response from Post) with
// handler. ctx is the request's context: when it ends, Err reports its
// error.
func NewStream(ctx context.Context, body io.ReadCloser, handler Handler) *Stream {
	return &Stream{ctx: ctx, body: body, dec: NewDecoder(body), handler: handler}
}

// Next advances to the next part.
func (s *Stream) Next() bool {
	emit := func(p engine.StreamPart) { s.queue = append(s.queue, p) }
	for len(s.queue) == 0 {
		if s.ended || s.err != nil || s.closed.Load() {
			return false
		}
		if err := s.ctx.Err(); err != nil {
			s.fail(err)
			return false
		}
		if !s.dec.Next() {
			switch err := s.dec.Err(); {
			case s.closed.Load():
				return false
			case s.ctx.Err() != nil:
				s.fail(s.ctx.Err())
			case err != nil:
				s.fail(&engine.UpstreamError{Retryable: true, Message: "reading event stream: " + err.Error()})
			default:
				s.ended = true
				if err := s.handler.End(emit); err != nil {
					s.fail(err)
				}
				s.Close()
			}
			continue
		}
		done, err := s.handler.Event(s.dec.Event(), emit)
		if err != nil {
			s.fail(err)
		} else if done {
			s.ended = true
			s.Close()
		}
	}
	s.cur, s.queue = s.queue[0], s.queue[1:]
	return true
}

// fail records err and releases the connection; parts already queued are
// dropped so a failed stream never ends with a finish part.
func (s *Stream) fail(err error) {
	var ue *engine.UpstreamError
	if r, ok := s.body.(*Response); ok && errors.As(err, &ue) {
		redacted := *ue
		redacted.Message = Redact(ue.Message, r.secrets)
		err = &redacted
	}
	s.err = err
	s.queue = nil
	s.Close()
}

// Current returns the part Next advanced to.
func (s *Stream) Current() engine.StreamPart { return s.cur }

// Err returns what ended the stream early, nil after a complete stream.
func (s *Stream) Err() error { return s.err }

// Close releases the connection; it may be called at any time, repeatedly.
func (s *Stream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		err = s.body.Close()
	})
	return err
}
