package tests

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// The keys of examples/inbound-guards/turngate.yaml.
const (
	inboundOlga  = "olga-ops-7e1c4a9d2b6f0e3a8c5d1b7f4e2a9c60"
	inboundOscar = "oscar-ops-3b8d0f6a2c9e4d1b7a5f3c8e0d6b2a94"
	inboundScrap = "scraper-5a0c8e2d4f6b1a3c9e7d5b3f1a0c8e6d"
)

// inboundMetricsPort gives the example's metrics listener a free port and
// the scraper's key.
func inboundMetricsPort(t *testing.T) []string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return []string{"METRICS_PORT=" + port, "METRICS_KEY=" + inboundScrap}
}

func exampleInboundGuards(t *testing.T, x *exampleRun) {
	var metricsURL string
	for _, e := range x.opts.Env {
		if port, ok := strings.CutPrefix(e, "METRICS_PORT="); ok {
			metricsURL = "http://127.0.0.1:" + port + "/metrics"
		}
	}
	get := func(url, key string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, url, key string
		want           int
	}{
		{"the public listener", x.URL + "/metrics", inboundScrap, http.StatusNotFound},
		{"no key", metricsURL, "", http.StatusUnauthorized},
		{"an API key", metricsURL, inboundOlga, http.StatusUnauthorized},
		{"the scraper's key", metricsURL, inboundScrap, http.StatusOK},
	} {
		if got := get(tc.url, tc.key); got != tc.want {
			t.Errorf("/metrics, %s: %d, want %d", tc.name, got, tc.want)
		}
	}
	var ready map[string]any
	x.json(http.MethodGet, "/readyz", nil, http.StatusOK, &ready)
	if _, ok := ready["replica"]; ok {
		t.Errorf("an anonymous /readyz names the replica: %v", ready)
	}
	olga, oscar := x.as(inboundOlga), x.as(inboundOscar)
	olga.json(http.MethodGet, "/readyz", nil, http.StatusOK, &ready)
	if ready["replica"] != "inbound-1" {
		t.Errorf("an operator's /readyz %v, want replica inbound-1", ready)
	}
	if resp := olga.raw(http.MethodPost, "/v1/agents/files/chat", "text/plain", []byte(`{"id":"form"}`)); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a text/plain body: %d, want 415", resp.StatusCode)
	}

	s := olga.chat("files", userChat("prod", "u-prod", "delete /prod/db", nil))
	req, ok := s.first("tool-approval-request")
	if !ok {
		t.Fatalf("no approval request:\n%s", s)
	}
	id := req.str("approvalId")
	olga.json(http.MethodPost, "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusForbidden, nil)
	oscar.json(http.MethodPost, "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusOK, nil)
	s = olga.chat("files", userChat("shared", "u-shared", "delete /shared/notes", nil))
	if req, ok = s.first("tool-approval-request"); !ok {
		t.Fatalf("no approval request:\n%s", s)
	}
	olga.json(http.MethodPost, "/v1/approvals/"+req.str("approvalId"), map[string]any{"approved": true}, http.StatusOK, nil)

	for range 5 {
		x.as("a-guess-of-no-one").json(http.MethodGet, "/v1/approvals", nil, http.StatusUnauthorized, nil)
	}
	olga.json(http.MethodGet, "/v1/approvals", nil, http.StatusTooManyRequests, nil)
	if logs := x.Stderr.String(); !strings.Contains(logs, "authentication failed") || strings.Contains(logs, "a-guess-of-no-one") {
		t.Errorf("failed authentications not logged at info, or logged with the key:\n%s", logs)
	}
}
