package sessionctx

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
)

// TestHTTPSource: a fetched content is kept for the TTL; a failure, a
// non-2xx status, a body over the bound and a source slower than the
// timeout are errors, and the last good content is not served for them.
func TestHTTPSource(t *testing.T) {
	var hits atomic.Int32
	var status atomic.Int32
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/big":
			_, _ = io.WriteString(w, strings.Repeat("x", config.MaxSourceBytes+1))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		default:
			w.WriteHeader(int(status.Load()))
			_, _ = io.WriteString(w, "guidance")
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	src := &httpSource{cfg: &config.HTTPBlock{URL: srv.URL + "/g", Timeout: time.Second, CacheTTL: time.Hour}, client: srv.Client()}
	for range 3 {
		if got, err := src.content(ctx); err != nil || got != "guidance" {
			t.Fatalf("content = %q, %v", got, err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d fetches within the TTL, want 1", n)
	}
	status.Store(http.StatusBadGateway)
	expired := &httpSource{cfg: &config.HTTPBlock{URL: srv.URL + "/g", Timeout: time.Second, CacheTTL: time.Nanosecond}, client: srv.Client()}
	if _, err := expired.content(ctx); err == nil || !strings.Contains(err.Error(), "status 502") {
		t.Errorf("a 502 = %v, want an error naming the status", err)
	}
	for _, path := range []string{"/big", "/slow"} {
		s := &httpSource{cfg: &config.HTTPBlock{URL: srv.URL + path, Timeout: 50 * time.Millisecond, CacheTTL: time.Hour}, client: srv.Client()}
		if got, err := s.content(ctx); err == nil {
			t.Errorf("%s: content of %d bytes, want an error", path, len(got))
		}
	}
}

// TestHTTPSourceRedirects: a block's headers follow a redirect on its
// URL's origin, and a redirect to another origin is not followed at all.
func TestHTTPSourceRedirects(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/notices", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, "/notices", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "token "+r.Header.Get("X-Api-Key"))
		}
	}))
	defer srv.Close()
	block := func(path string) *config.Session {
		return &config.Session{Context: []config.ContextBlock{{Name: "notices",
			HTTP: &config.HTTPBlock{URL: srv.URL + path, Headers: map[string]string{"X-Api-Key": "s3cret"}, Timeout: time.Second, CacheTTL: time.Hour}}}}
	}
	ctx := context.Background()
	if got, err := New(block("/moved"), "", Deps{}).sources[0].content(ctx); err != nil || got != "token s3cret" {
		t.Errorf("same-origin redirect: %q, %v", got, err)
	}
	if _, err := New(block("/away"), "", Deps{}).sources[0].content(ctx); err == nil || !strings.Contains(err.Error(), "redirect to another origin not followed") {
		t.Errorf("cross-origin redirect: %v, want it refused", err)
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}
}

// FuzzSplitPoint: the recent part always starts with a user message and
// keeps at least keepLast messages, or nothing is summarized.
func FuzzSplitPoint(f *testing.F) {
	f.Add("uauau", 2)
	f.Add("uaaaau", 1)
	f.Add("aaa", 4)
	f.Fuzz(func(t *testing.T, roles string, keepLast int) {
		if keepLast < 1 || len(roles) > 200 {
			return
		}
		msgs := make([]engineMessage, len(roles))
		for i := range roles {
			msgs[i] = roleMessage(roles[i])
		}
		cut := splitPoint(msgs, keepLast)
		if cut == 0 {
			return
		}
		if cut < 0 || cut >= len(msgs) || len(msgs)-cut < keepLast || msgs[cut].Role != "user" {
			t.Fatalf("splitPoint(%q, %d) = %d", roles, keepLast, cut)
		}
	})
}

// engineMessage is the transcript message type splitPoint takes.
type engineMessage = engine.UIMessage

// roleMessage is a message of role 'u' (user) or anything else (assistant).
func roleMessage(r byte) engine.UIMessage {
	if r == 'u' {
		return engine.UIMessage{Role: engine.RoleUser}
	}
	return engine.UIMessage{Role: engine.RoleAssistant}
}
