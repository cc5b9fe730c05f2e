// Package replay is test support for the HTTP providers: an in-process
// server that replays captured raw HTTP responses and records what it
// received, and golden-file rendering of stream parts.
package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
)

// Received is one request the server got.
type Received struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Server replays one raw HTTP response (status line, headers, blank line,
// body; a file captured from a real server) for every request.
type Server struct {
	*httptest.Server
	mu       sync.Mutex
	received []Received
}

// NewServer starts a server replaying the response in file. It is closed
// when the test ends.
func NewServer(t testing.TB, file string) *Server {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	return NewServerBytes(t, raw)
}

// NewServerBytes starts a server replaying raw, a raw HTTP response.
func NewServerBytes(t testing.TB, raw []byte) *Server {
	t.Helper()
	status, header, body, err := parse(raw)
	if err != nil {
		t.Fatalf("parsing fixture: %v", err)
	}
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.received = append(s.received, Received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: b})
		s.mu.Unlock()
		for k, vs := range header {
			w.Header()[k] = vs
		}
		w.WriteHeader(status)
		// Write event by event, flushing, as a real server streams.
		for _, piece := range bytes.SplitAfter(body, []byte("\n\n")) {
			w.Write(piece)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// parse reads a raw response leniently: the body is everything after the
// blank line, byte for byte (http.ReadResponse would apply framing).
func parse(raw []byte) (int, http.Header, []byte, error) {
	sep := []byte("\n\n")
	if i := bytes.Index(raw, []byte("\r\n\r\n")); i >= 0 && (bytes.Index(raw, sep) < 0 || i < bytes.Index(raw, sep)) {
		sep = []byte("\r\n\r\n")
	}
	head, body, ok := bytes.Cut(raw, sep)
	if !ok {
		return 0, nil, nil, errors.New("no blank line after the headers")
	}
	resp, err := http.ReadResponse(bufio.NewReader(io.MultiReader(bytes.NewReader(head), strings.NewReader("\r\n\r\n"))), nil)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, resp.Header, body, nil
}

// Received returns the requests received so far.
func (s *Server) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Render drains st and renders every part as one JSON line, then the
// stream's error, if any. An input that is not valid JSON is rendered as a
// "rawInput" string.
func Render(st engine.Stream) string {
	var b strings.Builder
	for st.Next() {
		p := st.Current()
		var raw string
		if len(p.Input) > 0 && !json.Valid(p.Input) {
			raw, p.Input = string(p.Input), nil
		}
		line, err := json.Marshal(p)
		if err != nil {
			fmt.Fprintf(&b, "unrenderable part: %v\n", err)
			continue
		}
		if raw != "" {
			line = append(line[:len(line)-1], fmt.Sprintf(",%q:%q}", "rawInput", raw)...)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := st.Err(); err != nil {
		fmt.Fprintf(&b, "error: %s\n", RenderError(err))
	}
	st.Close()
	return b.String()
}

// RenderError renders an error with an UpstreamError's fields spelt out.
func RenderError(err error) string {
	var ue *engine.UpstreamError
	if errors.As(err, &ue) {
		return fmt.Sprintf("UpstreamError{Status:%d Retryable:%t RetryAfter:%s Message:%q}", ue.Status, ue.Retryable, ue.RetryAfter, ue.Message)
	}
	return err.Error()
}

// Body returns the body of the captured response in file (everything after
// the blank line that ends the headers).
func Body(tb testing.TB, file string) []byte {
	tb.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		tb.Fatalf("reading fixture: %v", err)
	}
	_, _, body, err := parse(raw)
	if err != nil {
		tb.Fatalf("parsing fixture %s: %v", file, err)
	}
	return body
}

// SeedBodies adds the body of every captured response matching glob to
// the fuzzer's corpus.
func SeedBodies(f *testing.F, glob string) {
	files, _ := filepath.Glob(glob)
	if len(files) == 0 {
		f.Fatalf("no fixtures match %s", glob)
	}
	for _, file := range files {
		f.Add(Body(f, file))
	}
}

// CheckEnding drains st and fails t if it ended without an error but
// also without a finish part: every stream must end one way or the other.
func CheckEnding(t testing.TB, st engine.Stream) {
	t.Helper()
	n := 0
	var last engine.StreamPart
	for st.Next() {
		last = st.Current()
		n++
	}
	if st.Err() == nil && n > 0 && last.Type != engine.StreamFinish {
		t.Fatalf("stream ended cleanly without a finish part: %+v", last)
	}
}

// CheckCancel starts a stream against a server that sends first (one SSE
// event producing parts stream parts) and then holds the connection open;
// it cancels the context and checks that the next Next returns false with
// context.Canceled.
func CheckCancel(t *testing.T, first string, parts int, start func(ctx context.Context, baseURL string) (engine.Stream, error)) {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := start(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range parts {
		if !st.Next() {
			t.Fatalf("part %d missing: %v", i, st.Err())
		}
	}
	go cancel()
	if st.Next() {
		t.Fatalf("Next after cancel returned %+v", st.Current())
	}
	if !errors.Is(st.Err(), context.Canceled) {
		t.Errorf("Err = %v, want context.Canceled", st.Err())
	}
}

// CheckUpstreamError replays the captured error response in file to start
// and checks that the stream fails to start with exactly want.
func CheckUpstreamError(t *testing.T, file string, want engine.UpstreamError, start func(ctx context.Context, baseURL string) (engine.Stream, error)) {
	t.Helper()
	srv := NewServer(t, file)
	_, err := start(context.Background(), srv.URL)
	var ue *engine.UpstreamError
	if !errors.As(err, &ue) {
		t.Fatalf("error = %v, want *engine.UpstreamError", err)
	}
	if *ue != want {
		t.Errorf("got  %+v\nwant %+v", *ue, want)
	}
}
