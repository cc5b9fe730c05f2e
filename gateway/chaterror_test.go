package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
)

// busyText is what the onChatError rule of TestOnChatErrorByClass shows
// for a rate-limited turn.
const busyText = "The assistant is busy; try again in a minute."

// newFailingUpstream is an OpenAI-compatible upstream that answers a
// request whose last message mentions "rate" with a 429 and any other
// with a 401 (a bad key: fatal).
func newFailingUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content any `json:"content"`
			} `json:"messages"`
		}
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil || len(body.Messages) == 0 {
			t.Errorf("upstream request %s: %v", data, err)
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(mustJSON(body.Messages[len(body.Messages)-1].Content), "rate") {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error"}}`)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"bad key","type":"invalid_request_error"}}`)
	}))
	t.Cleanup(up.Close)
	return up
}

// TestOnChatErrorByClass runs real turns against an upstream that fails
// them: an onChatError rule masks the rate-limited one with its own text
// and leaves the fatal one the default; the rule's decision record and the
// turn's audit record carry the class, and so do the OpenAI endpoint's
// answers (429 with the rule's text, 502 not to retry).
func TestOnChatErrorByClass(t *testing.T) {
	up := newFailingUpstream(t)
	rules := filepath.Join(t.TempDir(), "rules")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rules, "errors.yaml"), []byte(`onChatError:
  - name: busy
    when: error.class == "rate_limit" && error.stage == "stream"
    set:
      message: '"`+busyText+`"'
`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "basic")
	cfg.Rules.Dir = rules
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Type: config.ProviderOpenAI, BaseURL: up.URL + "/v1", APIKey: "k"})
	cfg.Models["up"] = config.Model{Provider: "up", Model: "gpt-test"}
	cfg.Agents = append(cfg.Agents, config.Agent{Name: "failing", Model: "up", MaxRetries: new(1)})
	g := startGateway(t, cfg, Options{})

	tests := []struct {
		text, class, want string
		status            int // on /v1/chat/completions
	}{
		{"hit the rate limit", engine.ClassRateLimit, busyText, http.StatusTooManyRequests},
		{"use a bad key", engine.ClassFatal, maskedErrorText, http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			session := "s-" + tt.class
			var errText string
			for _, c := range readUIStream(t, g.do("POST", "/v1/agents/failing/chat", chatBody(session, "u1", tt.text))) {
				if c.str("type") == "error" {
					errText = c.str("errorText")
				}
			}
			if errText != tt.want {
				t.Errorf("error chunk %q, want %q", errText, tt.want)
			}
			var decision, turn map[string]any
			for line := range strings.Lines(g.auditLog()) {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) != nil || rec["sessionId"] != session {
					continue
				}
				switch {
				case rec["kind"] == "decision" && rec["hook"] == "onChatError":
					decision = rec
				case rec["kind"] == "turn":
					turn = rec
				}
			}
			if decision == nil || decision["errorClass"] != tt.class {
				t.Errorf("onChatError decision record %v, want errorClass %s", decision, tt.class)
			}
			if turn == nil || turn["errorClass"] != tt.class || turn["error"] != tt.want {
				t.Errorf("turn record %v, want errorClass %s and error %q", turn, tt.class, tt.want)
			}

			resp := g.do("POST", "/v1/chat/completions", map[string]any{"model": "failing",
				"messages": []any{map[string]any{"role": "user", "content": tt.text}}})
			defer resp.Body.Close()
			var body struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			retry := resp.Header.Get("x-should-retry")
			if resp.StatusCode != tt.status || (tt.class == engine.ClassRateLimit) != (retry == "true") ||
				(tt.class == engine.ClassRateLimit && body.Error.Message != busyText) {
				t.Errorf("/v1/chat/completions: %d x-should-retry %s %q", resp.StatusCode, retry, body.Error.Message)
			}
		})
	}
}
