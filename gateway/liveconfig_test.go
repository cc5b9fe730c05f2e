package gateway

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/liveconfig"
)

// TestApplyConfig: a limit applied live holds for the next request, and
// GET /v1/admin/config serves the live configuration's status (404 on a
// gateway without a config file to reload).
func TestApplyConfig(t *testing.T) {
	plain := newTestGateway(t, "basic")
	plain.doJSON("GET", "/v1/admin/config", nil, http.StatusNotFound, nil)

	cfg := testConfig(t, "basic")
	var g *testGateway
	live := liveconfig.New(filepath.Join("testdata", "config.yaml"), cfg, liveconfig.Options{Logger: discardLogger(),
		Apply: func(c *config.Config) error { return g.srv.ApplyConfig(c) }})
	g = startGateway(t, cfg, Options{LiveConfig: live})
	two := map[string]any{"model": "demo", "messages": []any{
		map[string]any{"role": "user", "content": "hello"}, map[string]any{"role": "user", "content": "weather in Paris"}}}
	g.doJSON("POST", "/v1/chat/completions", two, http.StatusOK, nil)

	next := testConfig(t, "basic")
	next.Limits.MaxMessages = 1
	if err := g.srv.ApplyConfig(next); err != nil {
		t.Fatal(err)
	}
	var refused struct {
		Error struct{ Message string } `json:"error"`
	}
	g.doJSON("POST", "/v1/chat/completions", two, http.StatusRequestEntityTooLarge, &refused)
	if want := "2 messages is more than the limit of 1"; refused.Error.Message != want {
		t.Errorf("refusal %q, want %q", refused.Error.Message, want)
	}

	var st liveconfig.Status
	g.doJSON("GET", "/v1/admin/config", nil, http.StatusOK, &st)
	if st.Revision != cfg.Revision() || st.Revision == "" || len(st.LiveFields) == 0 {
		t.Errorf("GET /v1/admin/config = %+v, want revision %s", st, cfg.Revision())
	}
}
