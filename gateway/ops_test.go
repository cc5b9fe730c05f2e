package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway/config"
)

func TestPprof(t *testing.T) {
	keys := []config.APIKey{
		{Key: "admin-key", Tenant: "a", Roles: []string{RoleAdmin}},
		{Key: "user-key", Tenant: "a"},
	}
	off := newTestGateway(t, "basic", func(c *config.Config) { c.Auth.APIKeys = keys })
	on := newTestGateway(t, "basic", func(c *config.Config) { c.Auth.APIKeys = keys; c.Debug.Pprof = true })
	tests := []struct {
		name string
		g    *testGateway
		key  string
		path string
		want int
		body string
	}{
		{"off by default", off, "admin-key", "/debug/pprof/", http.StatusNotFound, `"code":"not_found"`},
		{"off: named profile", off, "admin-key", "/debug/pprof/heap", http.StatusNotFound, `"code":"not_found"`},
		{"index for the admin", on, "admin-key", "/debug/pprof/", http.StatusOK, "goroutine"},
		{"named profile", on, "admin-key", "/debug/pprof/goroutine?debug=1", http.StatusOK, "goroutine profile:"},
		{"heap profile", on, "admin-key", "/debug/pprof/heap?debug=1", http.StatusOK, "heap profile:"},
		{"cmdline", on, "admin-key", "/debug/pprof/cmdline", http.StatusOK, ""},
		{"not an admin", on, "user-key", "/debug/pprof/heap", http.StatusForbidden, `"code":"forbidden"`},
		{"no key", on, "", "/debug/pprof/", http.StatusUnauthorized, `"code":"unauthorized"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.g.key = tc.key
			resp := tc.g.do("GET", tc.path, nil)
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || !strings.Contains(string(data), tc.body) {
				t.Errorf("status %d, body %.200s; want %d containing %q", resp.StatusCode, data, tc.want, tc.body)
			}
		})
	}
}

func TestHealthAndReadiness(t *testing.T) {
	g := newTestGateway(t, "basic")
	var health map[string]any
	g.doJSON("GET", "/healthz", nil, http.StatusOK, &health)
	if health["status"] != "ok" {
		t.Errorf("healthz %v", health)
	}
	var ready struct {
		Ready  bool              `json:"ready"`
		Checks map[string]string `json:"checks"`
	}
	g.doJSON("GET", "/readyz", nil, http.StatusOK, &ready)
	if !ready.Ready || ready.Checks["store"] != "ok" || ready.Checks["rules"] != "ok" {
		t.Errorf("readyz %+v", ready)
	}
	// A store that no longer answers makes the gateway not ready; it
	// stays alive.
	if err := g.store.Close(); err != nil {
		t.Fatal(err)
	}
	g.doJSON("GET", "/readyz", nil, http.StatusServiceUnavailable, &ready)
	if ready.Ready || ready.Checks["store"] != "unreachable" {
		t.Errorf("readyz with a closed store %+v", ready)
	}
	g.doJSON("GET", "/healthz", nil, http.StatusOK, nil)
}
