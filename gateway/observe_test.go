package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
)

// syncBuffer is a bytes.Buffer safe for the audit log's writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestAuditAndMetrics(t *testing.T) {
	var buf syncBuffer
	cfg := testConfig(t, "basic")
	cfg.Auth.APIKeys = []config.APIKey{{Key: "secret-key-123", Tenant: "acme", Subject: "ci", Roles: []string{"admin"}}}
	g := startGateway(t, cfg, Options{Audit: audit.New(&buf, []string{"decision.input.city", "toolCalls.*.input.city", "toolCalls.*.output.city"}, nil)})
	g.key = "secret-key-123"
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "delete /tmp/x")))
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u2", "weather in Lima")))

	var decisions, turns int
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if rec["tenant"] != "acme" || rec["sessionId"] != "s1" || rec["requestId"] == "" {
			t.Errorf("audit line lacks identity: %s", line)
		}
		switch rec["kind"] {
		case audit.KindDecision:
			decisions++
			if rec["hook"] == "beforeToolCall" && rec["toolName"] == "delete" && rec["outcome"] != "matched" {
				t.Errorf("the delete block is not recorded as matched: %s", line)
			}
		case audit.KindTurn:
			turns++
			if rec["status"] != "completed" || rec["revision"] == "" || rec["agent"] != "demo" {
				t.Errorf("turn line %s", line)
			}
		}
	}
	if decisions < 2 || turns != 2 {
		t.Errorf("%d decision and %d turn records, want ≥2 and 2", decisions, turns)
	}
	if strings.Contains(buf.String(), "secret-key-123") {
		t.Error("the API key reached the audit log")
	}
	if strings.Contains(buf.String(), `"city":"Lima"`) {
		t.Error("a redacted field reached the audit log")
	}

	resp := g.do("GET", "/metrics", nil)
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics status %d", resp.StatusCode)
	}
	for _, want := range []string{
		`turngate_turns_total{agent="demo",status="completed"} 2`,
		`turngate_tool_calls_total{decision="block",tool="delete"} 1`,
		`turngate_tool_calls_total{decision="allow",tool="weather"} 1`,
		`turngate_steps_total{agent="demo"} 4`,
		`turngate_hook_eval_seconds_count{hook="beforeToolCall"} 2`,
		`turngate_active_streams 0`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
