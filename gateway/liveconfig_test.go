package gateway

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/liveconfig"
	"github.com/turngate/turngate/internal/fakeclock"
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

// TestApplyConfigToolLimits: a reload that lowers limits.maxToolOutputBytes
// cuts the next turn's tool output, which the model then answers with.
func TestApplyConfigToolLimits(t *testing.T) {
	g := newTestGateway(t, "basic")
	weather := map[string]any{"model": "demo", "messages": []any{map[string]any{"role": "user", "content": "weather in Paris"}}}
	answer := func() string {
		var resp struct {
			Choices []struct {
				Message struct{ Content string }
			}
		}
		g.doJSON("POST", "/v1/chat/completions", weather, http.StatusOK, &resp)
		if len(resp.Choices) != 1 {
			t.Fatalf("%d choices, want 1", len(resp.Choices))
		}
		return resp.Choices[0].Message.Content
	}
	if got := answer(); !strings.Contains(got, `"city":"Paris"`) || strings.Contains(got, "truncated") {
		t.Fatalf("before the reload: %q, want the whole forecast", got)
	}
	next := testConfig(t, "basic")
	next.Limits.MaxToolOutputBytes = 10
	if err := g.srv.ApplyConfig(next); err != nil {
		t.Fatal(err)
	}
	if got := answer(); !strings.Contains(got, "…[truncated") {
		t.Errorf("after maxToolOutputBytes 10: %q, want the forecast cut", got)
	}
}

// TestApplyConfigTurnQueue: a reload that lowers
// limits.maxQueuedTurnsPerSession refuses the next request beyond the new
// bound with 429, while the turn running and the one waiting finish.
func TestApplyConfigTurnQueue(t *testing.T) {
	gate := newStepGate(false)
	cfg := testConfig(t, "empty")
	g := startGateway(t, cfg, Options{Observer: gate})
	first := send(g, "first")
	<-gate.entered
	waiter := send(g, "waits")
	waitFor(t, "a request to wait for the session", func() bool {
		g.srv.locks.mu.Lock()
		defer g.srv.locks.mu.Unlock()
		l := g.srv.locks.locks[sessionKey("default", "s1")]
		return l != nil && l.users == 2
	})
	next := testConfig(t, "empty")
	next.Limits.MaxQueuedTurnsPerSession = 1
	if err := g.srv.ApplyConfig(next); err != nil {
		t.Fatal(err)
	}
	assertTooMany(t, g)
	close(gate.open)
	for name, wait := range map[string]func() int{"first": first, "the waiter": waiter} {
		if code := wait(); code != http.StatusOK {
			t.Errorf("%s: %d, want 200", name, code)
		}
	}
}

// TestApplyConfigQuotaLimits: a reload that lowers a quota's limit
// refuses the next turn over it, counting the turns admitted before the
// reload; raising it admits turns again.
func TestApplyConfigQuotaLimits(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC))
	turns := config.Quota{Name: "principal-turns", Per: "principal", Turns: 5, Window: "1h"}
	g := startQuotaGateway(t, clock, turns)
	acme := g.as(ksAcmeKey)
	hello := map[string]any{"text": "hello"}
	acme.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", hello, http.StatusOK, nil)
	acme.doJSON("POST", "/v1/agents/demo/sessions/s2/messages", hello, http.StatusOK, nil)
	reload := func(limit int64) {
		t.Helper()
		next := testConfig(t, "basic")
		killSwitchKeys(next)
		turns.Turns = limit
		next.Quotas = []config.Quota{turns}
		if err := next.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := g.srv.ApplyConfig(next); err != nil {
			t.Fatal(err)
		}
	}
	reload(2)
	_, body := refusal(t, "over the lowered limit", acme.do("POST", "/v1/agents/demo/sessions/s3/messages", hello), http.StatusTooManyRequests)
	if msg, _ := body["message"].(string); !strings.Contains(msg, "2 turns per 1h") {
		t.Errorf("refusal %v, want the new limit of 2", body)
	}
	reload(3)
	acme.doJSON("POST", "/v1/agents/demo/sessions/s4/messages", hello, http.StatusOK, nil)
	refusal(t, "over the raised limit", acme.do("POST", "/v1/agents/demo/sessions/s5/messages", hello), http.StatusTooManyRequests)
}
