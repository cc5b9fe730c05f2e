package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
)

func TestDecoder(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // events as type|data, one per line
		err  error
	}{
		{"lf", "data: a\n\ndata: b\n\n", "|a\n|b\n", nil},
		{"crlf and cr", "event: x\r\ndata: a\r\n\r\ndata: b\r\r", "x|a\n|b\n", nil},
		{"multi-line data", "data: {\ndata: }\n\n", "|{\n}\n", nil},
		{"comments and unknown fields", ": ping\nid: 7\nretry: 10\nfoo: bar\ndata: a\n\n", "|a\n", nil},
		{"no space after colon", "data:a\n\n", "|a\n", nil},
		{"empty data line counts", "data:\n\n", "|\n", nil},
		{"event without data is dropped", "event: ping\n\ndata: a\n\n", "|a\n", nil},
		{"trailing event without blank line is discarded", "data: a\n\ndata: b", "|a\n", nil},
		{"line too long", "data: " + strings.Repeat("x", MaxLineBytes+1) + "\n\n", "", ErrLineTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder(strings.NewReader(tt.in))
			var got strings.Builder
			for d.Next() {
				fmt.Fprintf(&got, "%s|%s\n", d.Event().Type, d.Event().Data)
			}
			if got.String() != tt.want {
				t.Errorf("events = %q, want %q", got.String(), tt.want)
			}
			if !errors.Is(d.Err(), tt.err) {
				t.Errorf("Err = %v, want %v", d.Err(), tt.err)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"ms wins", map[string]string{"Retry-After": "3", "Retry-After-Ms": "250"}, 250 * time.Millisecond},
		{"bad ms falls back", map[string]string{"Retry-After": "2", "Retry-After-Ms": "soon"}, 2 * time.Second},
		{"past date", map[string]string{"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"garbage", map[string]string{"Retry-After": "later"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := RetryAfter(h); got != tt.want {
				t.Errorf("RetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":{"message":"m","type":"t"}}`, "t: m"},
		{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded_error: Overloaded"},
		{`{"error":"plain"}`, "plain"},
		{`{"message":"top"}`, "top"},
		{"  not json  ", "not json"},
		{strings.Repeat("x", 600), strings.Repeat("x", 512) + "…"},
	}
	for _, tt := range tests {
		if got := ErrorMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("ErrorMessage(%.20q) = %q, want %q", tt.body, got, tt.want)
		}
	}
}

func FuzzDecoder(f *testing.F) {
	f.Add([]byte("event: x\r\ndata: a\r\n\r\ndata: b\n\n"))
	f.Add([]byte("data: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder(strings.NewReader(string(in)))
		total := 0
		for d.Next() {
			total += len(d.Event().Data)
			if total > len(in) {
				t.Fatalf("decoded %d data bytes from %d input bytes", total, len(in))
			}
		}
	})
}

// TestCredentialsNeverInErrors: an upstream that echoes the API key in an
// error body (some OpenAI-compatible servers and proxies do) must not put
// it in the error text, which reaches logs.
func TestCredentialsNeverInErrors(t *testing.T) {
	const key = "sk-test-SECRET-0123456789"
	tests := []struct {
		name   string
		header http.Header
		status int
		body   string
	}{
		{"bearer, status error", http.Header{"Authorization": {"Bearer " + key}}, 401,
			`{"error":{"message":"Incorrect API key provided: ` + key + `","type":"invalid_request_error"}}`},
		{"x-api-key, status error", http.Header{"X-Api-Key": {key}}, 403, `{"error":{"message":"bad key ` + key + `"}}`},
		{"bearer, in-stream error", http.Header{"Authorization": {"Bearer " + key}}, 200,
			"data: {\"error\":{\"message\":\"key " + key + " revoked\",\"type\":\"server_error\"}}\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status == 200 {
					w.Header().Set("Content-Type", "text/event-stream")
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			stream, err := Open(context.Background(), Request{URL: srv.URL, Header: tt.header}, errorHandler{})
			if err == nil {
				for stream.Next() {
				}
				err = stream.Err()
				stream.Close()
			}
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "[REDACTED]") {
				t.Errorf("error %q: want the key redacted", err)
			}
		})
	}
}

// errorHandler turns a data object with an "error" key into the stream's
// error, as the providers' handlers do.
type errorHandler struct{}

func (errorHandler) Event(ev Event, _ func(engine.StreamPart)) (bool, error) {
	return false, StreamError(ev.Data)
}

func (errorHandler) End(func(engine.StreamPart)) error { return nil }

func TestEndpointAndRedactURL(t *testing.T) {
	tests := []struct{ base, path, url, redacted string }{
		{"https://api.openai.com/v1", "/chat/completions", "https://api.openai.com/v1/chat/completions", "https://api.openai.com/v1/chat/completions"},
		{"https://g.example/v1beta/openai/?key=s3cret", "/chat/completions", "https://g.example/v1beta/openai/chat/completions?key=s3cret", "https://g.example/v1beta/openai/chat/completions?key=xxxxx"},
		{"https://u:pw@proxy.example", "/v1/messages", "https://u:pw@proxy.example/v1/messages", "https://u:xxxxx@proxy.example/v1/messages"},
	}
	for _, tt := range tests {
		got := Endpoint(tt.base, tt.path)
		if got != tt.url {
			t.Errorf("Endpoint(%q, %q) = %q, want %q", tt.base, tt.path, got, tt.url)
		}
		if r := RedactURL(got); r != tt.redacted {
			t.Errorf("RedactURL(%q) = %q, want %q", got, r, tt.redacted)
		}
	}
}

// TestTransportErrorRedactsQuery: a failed request's error, which reaches
// the logs, does not carry the key of a baseURL's query.
func TestTransportErrorRedactsQuery(t *testing.T) {
	_, err := Post(context.Background(), Request{URL: Endpoint("http://127.0.0.1:1/v1?key=s3cret-key", "/chat/completions")})
	if err == nil || strings.Contains(err.Error(), "s3cret-key") || !strings.Contains(err.Error(), "key=xxxxx") {
		t.Errorf("error = %v, want the query value redacted", err)
	}
}

// TestRedirectsStayOnTheAPIOrigin: a model API that redirects to another
// origin gets its request refused there (a 307 would resend the API key
// and the conversation); a redirect on its own origin is followed.
func TestRedirectsStayOnTheAPIOrigin(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/v1/messages", http.StatusTemporaryRedirect)
		case "/moved":
			http.Redirect(w, r, "/v1/messages", http.StatusPermanentRedirect)
		default:
			if r.Header.Get("X-Api-Key") != "s3cret" {
				http.Error(w, "no key", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
		}
	}))
	defer api.Close()
	post := func(path string) (*Response, error) {
		return Post(context.Background(), Request{URL: api.URL + path, Header: http.Header{"X-Api-Key": {"s3cret"}}, Body: []byte(`{}`)})
	}
	if _, err := post("/away"); err == nil || !strings.Contains(err.Error(), "redirect to another origin not followed") {
		t.Errorf("redirect to another origin: %v, want it refused", err)
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}
	resp, err := post("/moved")
	if err != nil {
		t.Fatalf("same-origin redirect: %v", err)
	}
	resp.Close()
}
