package mcptool_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turngate/turngate/engine/tools/mcptool"
)

// authServer is a real MCP server over streamable HTTP that records the
// Authorization header of every request it gets, and redirects /old to
// /mcp (a redirect on its own origin).
type authServer struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func startAuthServer(t *testing.T) *authServer {
	t.Helper()
	s := &authServer{}
	mcpServer := newTestServer("v1")
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

func (s *authServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// TestHTTPRedirects: the MCP client follows a redirect on the server's
// origin, with its configured headers, but not one to another origin,
// which gets no request at all (the review's finding: the header
// transport re-added Authorization on every hop).
func TestHTTPRedirects(t *testing.T) {
	t.Run("another origin", func(t *testing.T) {
		target := startAuthServer(t)
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/mcp", http.StatusTemporaryRedirect)
		}))
		t.Cleanup(front.Close)
		m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: front.URL + "/mcp",
			Headers: map[string]string{"Authorization": "Bearer s3cret"}})
		if err := m.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "redirect to another origin not followed") {
			t.Errorf("Start error = %v, want the refused redirect", err)
		}
		if got := target.seen(); len(got) != 0 {
			t.Errorf("the other origin got %d requests, Authorization %q", len(got), got)
		}
	})
	t.Run("same origin", func(t *testing.T) {
		srv := startAuthServer(t)
		m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.URL + "/old",
			Headers: map[string]string{"Authorization": "Bearer s3cret"}})
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if out, err := execute(t, find(t, m.Tools(), "test_greet"), `{"name":"Ada"}`); err != nil || out != `"hello Ada"` {
			t.Errorf("call: %s, %v", out, err)
		}
		for i, a := range srv.seen() {
			if a != "Bearer s3cret" {
				t.Errorf("request %d: Authorization %q", i, a)
			}
		}
	})
}
