package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/internal/fakeclock"
)

// startQuotaGateway starts a gateway with the tenants' keys, quotas qs
// and the state on clock.
func startQuotaGateway(t *testing.T, clock *fakeclock.Clock, qs ...config.Quota) *testGateway {
	t.Helper()
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	cfg.Quotas = qs
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return startGateway(t, cfg, Options{Now: clock.Now})
}

// refusal reads a refused request's status, headers and JSON body.
func refusal(t *testing.T, what string, resp *http.Response, want int) (http.Header, map[string]any) {
	t.Helper()
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s: status %d, want %d: %s", what, resp.StatusCode, want, data)
	}
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("%s: %s: %v", what, data, err)
	}
	return resp.Header, body
}

// TestQuotaRefusesTurns: a principal's third turn within the window is
// refused before the model is called, on every entry path, in that path's
// shape (429 with Retry-After; OpenAI's rate-limit error with
// x-ratelimit-* headers; a WebSocket error frame), audited and counted;
// another principal's turns run; once the window has passed (an injected
// clock) the turns run again.
func TestQuotaRefusesTurns(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC))
	g := startQuotaGateway(t, clock, config.Quota{Name: "principal-turns", Per: "principal", Turns: 2, Window: "1h"})
	acme, globex := g.as(ksAcmeKey), g.as(ksGlobexKey)
	acme.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "hello"}, http.StatusOK, nil)
	readUIStream(t, acme.do("POST", "/v1/agents/demo/chat", chatBody("s2", "u1", "hello")))

	h, body := refusal(t, "chat", acme.do("POST", "/v1/agents/demo/chat", chatBody("s3", "u1", "hello")), http.StatusTooManyRequests)
	if body["code"] != CodeQuotaExceeded || !strings.Contains(body["message"].(string), "quota principal-turns is used up: 2 turns per 1h per principal") {
		t.Errorf("chat refusal %v", body)
	}
	if h.Get("Retry-After") == "" || h.Get("x-ratelimit-limit-requests") != "2" || h.Get("x-ratelimit-remaining-requests") != "0" {
		t.Errorf("chat refusal headers %v: want Retry-After and x-ratelimit-*", h)
	}
	if ra := h.Get("Retry-After"); ra != "3660" {
		t.Errorf("Retry-After %s, want 3660 (the window and its resolution, a sixtieth)", ra)
	}
	_, body = refusal(t, "saveMessages", acme.do("POST", "/v1/agents/demo/sessions/s4/messages", map[string]any{"text": "hello"}), http.StatusTooManyRequests)
	if body["code"] != CodeQuotaExceeded {
		t.Errorf("saveMessages refusal %v", body)
	}
	h, body = refusal(t, "openai", acme.do("POST", "/v1/chat/completions", map[string]any{"model": "demo",
		"messages": []any{map[string]any{"role": "user", "content": "hello"}}}), http.StatusTooManyRequests)
	if e, _ := body["error"].(map[string]any); e["type"] != "rate_limit_error" || e["code"] != CodeQuotaExceeded {
		t.Errorf("openai refusal %v: want OpenAI's rate_limit_error", body)
	}
	if h.Get("x-should-retry") != "true" || h.Get("retry-after-ms") != "3660000" || h.Get("x-ratelimit-reset-requests") != "1h1m0s" {
		t.Errorf("openai refusal headers %v", h)
	}
	h, body = refusal(t, "anthropic", acme.do("POST", "/v1/messages", map[string]any{"model": "demo", "max_tokens": 10,
		"messages": []any{map[string]any{"role": "user", "content": "hello"}}}), http.StatusTooManyRequests)
	if e, _ := body["error"].(map[string]any); body["type"] != "error" || e["type"] != "rate_limit_error" || !strings.Contains(e["message"].(string), "principal-turns") {
		t.Errorf("anthropic refusal %v: want Anthropic's rate_limit_error", body)
	}
	if h.Get("Retry-After") != "3660" || h.Get("x-should-retry") != "true" || h.Get("request-id") == "" {
		t.Errorf("anthropic refusal headers %v", h)
	}
	ws := g.dialWS(t, "demo", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ksAcmeKey}}})
	ws.write(sendFrame("r1", "s5", "u1", "hello", nil))
	if r := ws.collect("r1"); r.end != "error" || r.err["code"] != CodeQuotaExceeded || r.err["status"] != 429.0 || r.err["retryAfterMs"] != 3660000.0 {
		t.Errorf("WebSocket: ended %s with %v, want a quota error frame", r.end, r.err)
	}
	for _, s := range []string{"s3", "s4", "s5"} {
		acme.doJSON("GET", "/v1/agents/demo/sessions/"+s+"/messages", nil, http.StatusNotFound, nil)
	}
	if m := g.metricsText(); !strings.Contains(m, `turngate_quota_exceeded_total{at="turn",per="principal",quota="principal-turns"} 5`) {
		t.Errorf("metrics lack the refusals:\n%s", grepLines(m, "quota"))
	}
	if n := strings.Count(g.auditLog(), `"rulesFired":["quota/principal-turns"]`); n != 5 {
		t.Errorf("%d decision records of the quota, want 5", n)
	}
	// Another principal has a quota of its own.
	globex.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "hello"}, http.StatusOK, nil)

	// The window passes (at the Retry-After): the refused turns did not
	// count.
	clock.Advance(3660 * time.Second)
	acme.doJSON("POST", "/v1/agents/demo/sessions/s6/messages", map[string]any{"text": "hello"}, http.StatusOK, nil)
	acme.doJSON("POST", "/v1/agents/demo/sessions/s7/messages", map[string]any{"text": "hello"}, http.StatusOK, nil)
	refusal(t, "third turn of the new window", acme.do("POST", "/v1/agents/demo/sessions/s8/messages", map[string]any{"text": "hello"}), http.StatusTooManyRequests)
}

// TestQuotaTokenBudget: a tenant's output token budget that runs out
// during a turn stops it at the next step boundary with a stop text the
// client sees; the tenant's next turn is refused with x-ratelimit-*-tokens
// until the next day (calendar window, injected clock).
func TestQuotaTokenBudget(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC))
	g := startQuotaGateway(t, clock, config.Quota{Name: "tenant-output", Per: "tenant", OutputTokens: 1, Window: "day"})
	acme := g.as(ksAcmeKey)
	var res turnResponse
	acme.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "weather in Lima"}, http.StatusOK, &res)
	text := mustJSON(res.Message)
	if !strings.Contains(text, "Stopped after 1 step (quota tenant-output used up: 1 outputTokens per day).") || strings.Contains(text, "Here is the weather") {
		t.Errorf("the turn was not stopped after its first step: %s", text)
	}
	h, body := refusal(t, "next turn", acme.do("POST", "/v1/agents/demo/sessions/s2/messages", map[string]any{"text": "hello"}), http.StatusTooManyRequests)
	if body["code"] != CodeQuotaExceeded || h.Get("x-ratelimit-limit-tokens") != "1" || h.Get("Retry-After") != "3600" {
		t.Errorf("next turn: %v %v, want a tokens refusal until midnight", h, body)
	}
	m := g.metricsText()
	for _, want := range []string{`turngate_quota_exceeded_total{at="step",per="tenant",quota="tenant-output"} 1`,
		`turngate_quota_exceeded_total{at="turn",per="tenant",quota="tenant-output"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "quota"))
		}
	}
	clock.Advance(time.Hour)
	acme.doJSON("POST", "/v1/agents/demo/sessions/s3/messages", map[string]any{"text": "hello"}, http.StatusOK, nil)
}

// TestQuotaExactOnReplicas: 60 concurrent turns of one tenant spread over
// three replicas of one PostgreSQL database, against a quota of 20 turns:
// exactly 20 run and 40 are refused, and the refused ones do not count.
func TestQuotaExactOnReplicas(t *testing.T) {
	tenantTurns(t, threeReplicas(t, func(cfg *config.Config) { cfg.Quotas = tenantTurnsQuota }))
}

// TestQuotaExactSQLite is TestQuotaExactOnReplicas's twin on one SQLite
// gateway.
func TestQuotaExactSQLite(t *testing.T) {
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	cfg.Quotas = tenantTurnsQuota
	tenantTurns(t, []*testGateway{startGateway(t, cfg, Options{})})
}

var tenantTurnsQuota = []config.Quota{{Name: "tenant-turns", Per: "tenant", Turns: 20, Window: "1h"}}

// tenantTurns sends 60 concurrent turns of acme, spread over gs, against
// tenantTurnsQuota: exactly 20 must run.
func tenantTurns(t *testing.T, gs []*testGateway) {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			resp := gs[i%len(gs)].as(ksAcmeKey).do("POST", fmt.Sprintf("/v1/agents/demo/sessions/c%d/messages", i), map[string]any{"text": "hello"})
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[http.StatusOK] != 20 || codes[http.StatusTooManyRequests] != 40 {
		t.Errorf("statuses %v, want exactly 20 × 200 and 40 × 429", codes)
	}
	refusal(t, "the 61st", gs[0].as(ksAcmeKey).do("POST", "/v1/agents/demo/sessions/c61/messages", map[string]any{"text": "hello"}), http.StatusTooManyRequests)
}

// TestQuotaFailsClosed: when the store does not answer, a turn under a
// quota is refused with 503, never admitted uncounted.
func TestQuotaFailsClosed(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC))
	g := startQuotaGateway(t, clock, config.Quota{Name: "principal-turns", Per: "principal", Turns: 5, Window: "1h"})
	g.store.Close()
	h, body := refusal(t, "saveMessages", g.as(ksAcmeKey).do("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "hello"}), http.StatusServiceUnavailable)
	if (body["code"] != CodeUnavailable && body["code"] != CodeStoreUnavailable) || h.Get("Retry-After") == "" {
		t.Errorf("refusal %v %v, want 503 unavailable with Retry-After", h, body)
	}
}
