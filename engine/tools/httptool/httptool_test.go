package httptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/httptool"
)

// seen records what the test server received.
type seen struct {
	method  string
	body    string
	headers http.Header
}

// newServer starts an httptest server whose routes answer as real tool
// endpoints would; every request is recorded in the returned channel.
func newServer(t *testing.T) (*httptest.Server, chan seen) {
	t.Helper()
	got := make(chan seen, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		io.WriteString(w, `{"weather":"sunny","temp":21}`)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "it is \"sunny\"\n")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, r.Body)
	})
	mux.HandleFunc("/to-echo", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/echo", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/unavailable", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, strings.Repeat("maintenance ", 50), http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/badjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"unterminated":`)
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte{0x89, 'P', 'N', 'G'})
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers; the caller's deadline ends the call
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `["`)
		chunk := []byte(strings.Repeat("x", 1<<10))
		for range 10 << 10 { // 10 MiB, far beyond the cap
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		io.WriteString(w, `"]`)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{method: r.Method, body: string(b), headers: r.Header.Clone()}
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func call(input string) engine.ToolExecution {
	return engine.ToolExecution{
		Identity:   engine.Identity{RequestID: "req-1", SessionID: "sess-1", Agent: "a"},
		ToolCallID: "call-1",
		ToolName:   "weather",
		Input:      json.RawMessage(input),
	}
}

func TestExecute(t *testing.T) {
	srv, _ := newServer(t)
	tests := []struct {
		name    string
		path    string
		input   string
		want    string
		wantErr string
	}{
		{name: "json body is the output", path: "/json", input: `{"city":"Paris"}`, want: `{"weather":"sunny","temp":21}`},
		{name: "text body is a json string", path: "/text", input: `{}`, want: `"it is \"sunny\"\n"`},
		{name: "input is posted as is", path: "/echo", input: `{"city":"Paris","n":[1,2]}`, want: `{"city":"Paris","n":[1,2]}`},
		{name: "empty input posts an object", path: "/echo", input: ``, want: `{}`},
		{name: "no content is null", path: "/empty", input: `{}`, want: `null`},
		{name: "non-2xx is an error with the body start", path: "/unavailable", input: `{}`,
			wantErr: "http tool weather: status 503: " + strings.TrimSpace(strings.Repeat("maintenance ", 50)[:200])},
		{name: "invalid json body is an error", path: "/badjson", input: `{}`, wantErr: "http tool weather: response is not valid JSON"},
		{name: "binary body is an error", path: "/binary", input: `{}`, wantErr: `http tool weather: unsupported response content type "image/png"`},
		{name: "not found is an error", path: "/missing", input: `{}`, wantErr: "http tool weather: status 404: 404 page not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, err := httptool.New("weather", httptool.Config{URL: srv.URL + tt.path})
			if err != nil {
				t.Fatal(err)
			}
			out, err := ex.Execute(context.Background(), call(tt.input))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("output = %s, want %s", out, tt.want)
			}
		})
	}
}

func TestExecuteSendsHeadersAndMethod(t *testing.T) {
	srv, got := newServer(t)
	ex, err := httptool.New("weather", httptool.Config{
		URL:    srv.URL + "/json",
		Method: "put",
		// A configured turngate header does not override the call's own.
		Headers: map[string]string{"Authorization": "Bearer s3cret", httptool.HeaderToolCallID: "configured",
			httptool.HeaderIdempotencyKey: "configured"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := call(`{"city":"Paris"}`)
	c.IdempotencyKey = "key-1"
	if _, err := ex.Execute(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	r := <-got
	checks := map[string]string{
		"method":                      r.method,
		"body":                        r.body,
		"Authorization":               r.headers.Get("Authorization"),
		"Content-Type":                r.headers.Get("Content-Type"),
		httptool.HeaderRequestID:      r.headers.Get(httptool.HeaderRequestID),
		httptool.HeaderSessionID:      r.headers.Get(httptool.HeaderSessionID),
		httptool.HeaderToolCallID:     r.headers.Get(httptool.HeaderToolCallID),
		httptool.HeaderIdempotencyKey: r.headers.Get(httptool.HeaderIdempotencyKey),
	}
	want := map[string]string{
		"method":                      "PUT",
		"body":                        `{"city":"Paris"}`,
		"Authorization":               "Bearer s3cret",
		"Content-Type":                "application/json",
		httptool.HeaderRequestID:      "req-1",
		httptool.HeaderSessionID:      "sess-1",
		httptool.HeaderToolCallID:     "call-1",
		httptool.HeaderIdempotencyKey: "key-1",
	}
	for k, w := range want {
		if checks[k] != w {
			t.Errorf("%s = %q, want %q", k, checks[k], w)
		}
	}
}

// TestExecuteRedirects is the review's probe: a tool backend that
// redirects to another origin gets neither its secret header nor the
// tool's input there (307/308 resend the body); a redirect on the
// endpoint's own origin is followed with both.
func TestExecuteRedirects(t *testing.T) {
	srv, got := newServer(t)
	other, otherGot := newServer(t) // another port: another origin
	redirect := func(status int, to string) string {
		h := http.NewServeMux()
		h.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, status) })
		s := httptest.NewServer(h)
		t.Cleanup(s.Close)
		return s.URL
	}
	tests := []struct {
		name    string
		url     string
		want    string
		wantErr string
	}{
		{name: "307 to another origin", url: redirect(http.StatusTemporaryRedirect, other.URL+"/echo"),
			wantErr: "redirect to another origin not followed"},
		{name: "308 to another origin", url: redirect(http.StatusPermanentRedirect, other.URL+"/echo"),
			wantErr: "redirect to another origin not followed"},
		{name: "302 to another origin", url: redirect(http.StatusFound, other.URL+"/json"),
			wantErr: "redirect to another origin not followed"},
		{name: "307 to another host name of the same address", url: redirect(http.StatusTemporaryRedirect, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/echo"),
			wantErr: "redirect to another origin not followed"},
		{name: "308 on the same origin", url: srv.URL + "/to-echo", want: `{"city":"Paris"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex, err := httptool.New("weather", httptool.Config{URL: tt.url, Headers: map[string]string{"X-Api-Key": "s3cret"}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := ex.Execute(context.Background(), call(`{"city":"Paris"}`))
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Fatal(err)
			case string(out) != tt.want:
				t.Errorf("output = %s, want %s", out, tt.want)
			}
			select {
			case r := <-otherGot:
				t.Errorf("the other origin got a %s with X-Api-Key %q and body %q", r.method, r.headers.Get("X-Api-Key"), r.body)
			default:
			}
			if tt.wantErr == "" {
				for range 2 { // the redirecting request and the followed one
					if r := <-got; r.headers.Get("X-Api-Key") != "s3cret" || r.body != `{"city":"Paris"}` {
						t.Errorf("same origin got X-Api-Key %q and body %q", r.headers.Get("X-Api-Key"), r.body)
					}
				}
			}
		})
	}
}

func TestExecuteTimeout(t *testing.T) {
	srv, _ := newServer(t)
	ex, err := httptool.New("slow", httptool.Config{URL: srv.URL + "/slow"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = ex.Execute(ctx, call(`{}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want deadline exceeded", err)
	}
	if want := "http tool slow: request cancelled: context deadline exceeded"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestExecuteHugeBodyIsCapped(t *testing.T) {
	srv, _ := newServer(t)
	const max = 64 << 10
	ex, err := httptool.New("huge", httptool.Config{URL: srv.URL + "/huge"}, httptool.WithMaxBodyBytes(max))
	if err != nil {
		t.Fatal(err)
	}
	out, err := ex.Execute(context.Background(), call(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("capped output is not a JSON string: %v", err)
	}
	if len(s) != max || !strings.HasPrefix(s, `["xxx`) {
		t.Errorf("capped output: %d bytes starting %q, want %d bytes", len(s), s[:10], max)
	}
}

func TestExecuteTransportError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	ex, err := httptool.New("gone", httptool.Config{URL: addr + "/x?token=s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ex.Execute(context.Background(), call(`{}`))
	if err == nil {
		t.Fatal("no error from a closed server")
	}
	if !strings.HasPrefix(err.Error(), "http tool gone: Post request failed: ") {
		t.Errorf("error = %q", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the url: %q", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     httptool.Config
		wantErr string
	}{
		{name: "no scheme", cfg: httptool.Config{URL: "example.com/x"}, wantErr: `url "example.com/x": scheme must be http or https`},
		{name: "ftp", cfg: httptool.Config{URL: "ftp://example.com/x"}, wantErr: `url "ftp://example.com/x": scheme must be http or https`},
		{name: "no host", cfg: httptool.Config{URL: "http:///x"}, wantErr: `url "http:///x": no host`},
		{name: "get has no body", cfg: httptool.Config{URL: "http://h", Method: "GET"}, wantErr: `method "GET": must be POST, PUT or PATCH (the JSON input is the body)`},
		{name: "header name", cfg: httptool.Config{URL: "http://h", Headers: map[string]string{"Bad Name": "v"}}, wantErr: `header "Bad Name": invalid name`},
		{name: "header injection", cfg: httptool.Config{URL: "http://h", Headers: map[string]string{"X-A": "v\r\nX-B: w"}}, wantErr: `header "X-A": value contains a control character`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := httptool.New("t", tt.cfg)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func BenchmarkExecute(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, r.Body)
	}))
	defer srv.Close()
	ex, err := httptool.New("echo", httptool.Config{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	c := call(`{"city":"Paris","days":3}`)
	for b.Loop() {
		if _, err := ex.Execute(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
}
