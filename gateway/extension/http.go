package extension

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/turngate/turngate/internal/tracing"
)

// transport delivers one envelope to an extension and returns its answer.
type transport interface {
	// call sends body, the envelope numbered id, and returns the answer,
	// at most MaxResponseBytes long. ctx bounds the whole exchange.
	call(ctx context.Context, id uint64, body []byte) ([]byte, error)
	// close releases the transport; calls fail afterwards.
	close()
}

// NewHTTPClient returns the client every http extension uses, sending
// through rt (nil: http.DefaultTransport). It is the one place extension
// requests are built from, so the tracing transport wraps rt here: a
// beforeTurn delivery carries the turn span's traceparent (queued
// observation deliveries run after the turn, on the worker's context, and
// carry none). It follows
// no redirect: a signed delivery goes to the configured URL only. Each
// request is bounded by its context (the extension's timeout), not by a
// client timeout.
func NewHTTPClient(rt http.RoundTripper) *http.Client {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &http.Client{Transport: tracing.Transport(rt), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// httpTransport POSTs each envelope to url, signed with secret.
type httpTransport struct {
	client *http.Client
	url    string
	name   string
	secret []byte
	now    func() time.Time
}

func (t *httpTransport) call(ctx context.Context, _ uint64, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "turngate-extension/1")
	req.Header.Set("X-Turngate-Extension", t.name)
	req.Header.Set(SignatureHeader, Sign(t.secret, t.now(), body))
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("answered HTTP %d%s", resp.StatusCode, excerpt(data))
	}
	if len(data) > MaxResponseBytes {
		return nil, errTooLarge
	}
	return data, nil
}

func (t *httpTransport) close() { t.client.CloseIdleConnections() }

// errTooLarge is an answer over MaxResponseBytes.
var errTooLarge = fmt.Errorf("answer exceeds the %d-byte limit", MaxResponseBytes)

// excerpt returns the start of an error answer for a log line: up to 120
// bytes on one line, printable ASCII only.
func excerpt(data []byte) string {
	const max = 120
	s := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return ' '
		}
		return r
	}, string(data[:min(len(data), max)]))
	if s = strings.TrimSpace(s); s == "" {
		return ""
	}
	return ": " + s
}

// isTimeout reports whether err is a delivery that ran out of time.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded)
}
