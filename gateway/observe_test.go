package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/internal/syncbuf"
)

func TestAuditAndMetrics(t *testing.T) {
	var buf syncbuf.Buffer
	cfg := testConfig(t, "basic")
	cfg.Auth.APIKeys = []config.APIKey{{Key: "secret-key-123", Tenant: "acme", Subject: "ci", Roles: []string{"admin"}}}
	g := startGateway(t, cfg, Options{Audit: audit.New(&buf, []string{"decision.input.city", "toolCalls.*.input.city", "toolCalls.*.output.city"}, nil)})
	g.key = "secret-key-123"
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "delete /tmp/x")))
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u2", "weather in Lima")))
	// onChatResponse is recorded once the response is written, which the
	// client can see end before the record reaches the sink.
	waitFor(t, "two onChatResponse records", func() bool {
		return strings.Count(buf.String(), `"kind":"`+audit.KindOnChatResponse+`"`) >= 2
	})

	var decisions, turns, steps, responses int
	calls := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if rec["kind"] == audit.KindChainStart {
			continue
		}
		if rec["tenant"] != "acme" || rec["sessionId"] != "s1" || rec["requestId"] == "" {
			t.Errorf("audit line lacks identity: %s", line)
		}
		switch rec["kind"] {
		case audit.KindDecision:
			decisions++
			if rec["hook"] == "beforeToolCall" && rec["toolName"] == "delete" {
				fired, _ := rec["rulesFired"].([]any)
				if rec["outcome"] != "matched" || len(fired) == 0 || rec["decision"] == nil {
					t.Errorf("the delete block is not recorded as matched with its rules and decision: %s", line)
				}
			}
			for _, k := range []string{"time", "hook", "revision", "agent", "durationUs"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("decision line lacks %s: %s", k, line)
				}
			}
		case audit.KindAfterToolCall:
			calls[rec["toolName"].(string)] = rec
		case audit.KindOnStepFinish:
			steps++
			usage, _ := rec["usage"].(map[string]any)
			if rec["stepNumber"] == nil || rec["finishReason"] == "" || usage["inputTokens"] == nil || rec["toolCallCount"] != rec["toolResultCount"] {
				t.Errorf("onStepFinish line %s", line)
			}
		case audit.KindOnChatResponse:
			responses++
			if rec["status"] != "completed" || rec["steps"] != 2.0 {
				t.Errorf("onChatResponse line %s", line)
			}
		case audit.KindTurn:
			turns++
			if rec["status"] != "completed" || rec["revision"] == "" || rec["agent"] != "demo" || rec["subject"] != "ci" ||
				rec["entryPath"] != "chat" || rec["durationMs"] == nil || rec["time"] == nil {
				t.Errorf("turn line %s", line)
			}
		}
	}
	if decisions < 2 || turns != 2 || steps != 4 || responses != 2 {
		t.Errorf("%d decision, %d turn, %d onStepFinish and %d onChatResponse records, want ≥2, 2, 4 and 2", decisions, turns, steps, responses)
	}
	// The blocked delete never ran (the model sees the block reason); the
	// weather call ran and returned output.
	for tool, want := range map[string]struct {
		decision string
		executed bool
	}{"delete": {"block", false}, "weather": {"allow", true}} {
		rec := calls[tool]
		if rec == nil || rec["success"] != true || rec["decision"] != want.decision || rec["executed"] != want.executed ||
			rec["outputBytes"].(float64) == 0 || rec["toolCallId"] == "" || rec["stepNumber"] != 0.0 || rec["durationMs"] == nil {
			t.Errorf("afterToolCall record of %s = %v, want success, decision %s, executed %v and an output", tool, rec, want.decision, want.executed)
		}
	}
	if strings.Contains(buf.String(), "secret-key-123") {
		t.Error("the API key reached the audit log")
	}
	if strings.Contains(buf.String(), `"city":"Lima"`) {
		t.Error("a redacted field reached the audit log")
	}

	data := g.metricsText()
	for _, want := range []string{
		`turngate_turns_total{agent="demo",status="completed",tenant="acme"} 2`,
		`turngate_tool_calls_total{decision="block",tenant="acme",tool="delete"} 1`,
		`turngate_tool_calls_total{decision="allow",tenant="acme",tool="weather"} 1`,
		`turngate_turn_duration_seconds_count{agent="demo",status="completed"} 2`,
		`turngate_time_to_first_chunk_seconds_count{agent="demo"} 2`,
		`turngate_tool_call_duration_seconds_count{tool="weather"} 1`,
		`turngate_http_request_duration_seconds_count{method="POST",route="/v1/agents/:agent/chat",status="200"} 2`,
		`turngate_steps_total{agent="demo"} 4`,
		`turngate_hook_eval_seconds_count{hook="beforeToolCall"} 2`,
		`turngate_active_streams 0`,
		`turngate_upstream_request_seconds_count{model="demo"} 4`,
	} {
		if !strings.Contains(data, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// metricsText returns the gateway's /metrics page.
func (g *testGateway) metricsText() string {
	g.t.Helper()
	resp := g.do("GET", "/metrics", nil)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		g.t.Fatalf("metrics status %d", resp.StatusCode)
	}
	return string(data)
}

func TestActiveStreamsGauge(t *testing.T) {
	g := newTestGateway(t, "basic")
	resp := g.do("POST", "/v1/agents/slow/chat", chatBody("s1", "u1", "tell me a long story"))
	readUntil(t, bufio.NewReader(resp.Body), `"text-delta"`)
	if m := g.metricsText(); !strings.Contains(m, "turngate_active_streams 1\n") {
		t.Errorf("during a chat stream the gauge is not 1:\n%s", grepLines(m, "active_streams"))
	}
	g.doJSON("POST", "/v1/agents/slow/sessions/s1/cancel", nil, http.StatusOK, nil)
	resp.Body.Close()
	waitFor(t, "the stream to end", func() bool { return strings.Contains(g.metricsText(), "turngate_active_streams 0\n") })
	// The turn is counted when its outcome is recorded, which may come
	// just after the stream ended: wait for it rather than race it.
	waitFor(t, "the cancelled turn counted aborted", func() bool {
		return strings.Contains(g.metricsText(), `turngate_turns_total{agent="slow",status="aborted",tenant="default"} 1`)
	})
}

// TestUpstreamFailureCounted checks the upstream metrics, and that an
// agent's maxRetries 0 reaches the engine: a retryable upstream failure
// ends the turn after one request.
func TestUpstreamFailureCounted(t *testing.T) {
	up := newFakeOpenAI(t)
	up.failures = 1
	g := newTestGateway(t, "basic", withUpstream(up, "", config.Agent{Name: "remote", Model: "up", MaxRetries: new(0)}))
	var failed turnResponse
	g.doJSON("POST", "/v1/agents/remote/sessions/s1/messages", map[string]any{"text": "hi"}, http.StatusOK, &failed)
	g.doJSON("POST", "/v1/agents/remote/sessions/s1/messages", map[string]any{"text": "again"}, http.StatusOK, nil)
	if failed.Status != engine.StatusError {
		t.Errorf("first turn %q, want error", failed.Status)
	}
	up.mu.Lock()
	if len(up.bodies) != 2 {
		t.Errorf("%d upstream requests for two turns, want 2 (maxRetries 0)", len(up.bodies))
	}
	up.mu.Unlock()
	m := g.metricsText()
	for _, want := range []string{
		`turngate_upstream_errors_total{model="up"} 1`,
		`turngate_upstream_request_seconds_count{model="up"} 2`,
		`turngate_turns_total{agent="remote",status="error",tenant="default"} 1`,
		`turngate_turns_total{agent="remote",status="completed",tenant="default"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "upstream", "turns_total"))
		}
	}
}

// grepLines returns the lines of text that contain any of words.
func grepLines(text string, words ...string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestMetricsCardinality: what a caller puts in a request never becomes a
// label value. A token naming a tenant the config does not know is refused
// and its tenant is nowhere in /metrics; the turns of a configured tenant
// carry its name; a request is observed under its route's template, not
// its path with the session id, and any path no route matches under one
// "unmatched" series.
func TestMetricsCardinality(t *testing.T) {
	g := newJWTGateway(t)
	g.key = g.token(t, nil)
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("card-s-4242", "u1", "weather in Lima")))
	resp := g.do("GET", "/v1/agents/demo/sessions/card-s-4242/messages", nil)
	resp.Body.Close()
	const rogue = "initech-3b9f0e71"
	g.key = g.token(t, map[string]any{"org": rogue})
	resp = g.do("POST", "/v1/agents/demo/chat", chatBody("card-s-9999", "u1", "hello"))
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a token of tenant %s: status %d, want 403", rogue, resp.StatusCode)
	}
	for _, path := range []string{"/v1/agents/demo/sessions/card-s-4242/nope", "/wp-admin/card-probe-77"} {
		resp = g.do("GET", path, nil)
		resp.Body.Close()
	}
	g.key = "7f3c9a2b4e8d1f60aa11bb22cc33dd44"
	m := g.metricsText()
	for _, raw := range []string{rogue, "card-s-4242", "card-s-9999", "card-probe-77", "wp-admin"} {
		if strings.Contains(m, raw) {
			t.Errorf("/metrics holds %q:\n%s", raw, grepLines(m, raw))
		}
	}
	for _, want := range []string{
		`turngate_turns_total{agent="demo",status="completed",tenant="acme"} 1`,
		`turngate_http_request_duration_seconds_count{method="GET",route="/v1/agents/:agent/sessions/:id/messages",status="200"} 1`,
		`turngate_http_request_duration_seconds_count{method="POST",route="/v1/agents/:agent/chat",status="403"} 1`,
		`turngate_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"} 2`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "turns_total", "http_request_duration_seconds_count"))
		}
	}
	for _, l := range strings.Split(m, "\n") {
		if _, rest, ok := strings.Cut(l, `tenant="`); ok && !strings.HasPrefix(l, "#") {
			if v, _, _ := strings.Cut(rest, `"`); v != "acme" && v != "other" {
				t.Errorf("tenant label %q is not a configured tenant: %s", v, l)
			}
		}
	}
}
