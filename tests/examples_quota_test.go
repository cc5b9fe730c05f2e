package tests

import (
	"net/http"
	"strings"
	"testing"
)

// exampleTokenBudgetPerTenant: acme's research turn runs its daily output
// token budget out and stops at the next step; acme's next turn is refused
// with 429 and the rate-limit headers before the model is called; globex
// has its own budget.
func exampleTokenBudgetPerTenant(t *testing.T, x *exampleRun) {
	acme, globex := x.as("acme-demo-3c9d1e7f5a2b48c6d0e4f1a7b3c5d9e2"), x.as("globex-demo-4d0e2f8a6b3c49d7e1f5a2b8c4d6e0f3")
	var hello, research struct {
		Status  string `json:"status"`
		Message any    `json:"message"`
	}
	acme.json(http.MethodPost, "/v1/agents/researcher/sessions/a1/messages", map[string]any{"text": "hello"}, http.StatusOK, &hello)
	acme.json(http.MethodPost, "/v1/agents/researcher/sessions/a2/messages", map[string]any{"text": "research solar panels"}, http.StatusOK, &research)
	text := mustJSON(t, research.Message)
	if !strings.Contains(text, "Stopped after 2 steps (quota tenant-output-tokens used up: 40 outputTokens per day).") || strings.Contains(text, "Here is what I found") {
		t.Errorf("the research turn did not stop at its step boundary: %s", text)
	}
	resp := acme.do(http.MethodPost, "/v1/agents/researcher/sessions/a3/messages", map[string]any{"text": "hello"})
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Ratelimit-Limit-Tokens") != "40" {
		t.Errorf("acme's next turn: %d %v, want 429 with Retry-After and x-ratelimit-limit-tokens", resp.StatusCode, resp.Header)
	}
	acme.json(http.MethodGet, "/v1/agents/researcher/sessions/a3/messages", nil, http.StatusNotFound, nil)
	globex.json(http.MethodPost, "/v1/agents/researcher/sessions/g1/messages", map[string]any{"text": "hello"}, http.StatusOK, nil)
}
