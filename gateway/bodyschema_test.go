package gateway

import (
	"net/http"
	"testing"

	"github.com/turngate/turngate/gateway/config"
)

// TestBodySchema sends request bodies to an agent that declares a
// bodySchema: every entry path with a custom body validates it on entry,
// answering 400 invalid_body with the JSON pointer of the first violation;
// valid bodies run.
func TestBodySchema(t *testing.T) {
	g := newTestGateway(t, "basic", func(c *config.Config) {
		for i := range c.Agents {
			if c.Agents[i].Name == "demo" {
				c.Agents[i].BodySchema = map[string]any{
					"type": "object",
					"properties": map[string]any{
						"mode":   map[string]any{"enum": []any{"read-only", "read-write"}},
						"limits": map[string]any{"type": "object", "properties": map[string]any{"max": map[string]any{"type": "integer"}}},
					},
					"additionalProperties": false,
				}
			}
		}
	})
	saveBody := func(body map[string]any) map[string]any {
		return map[string]any{"messages": []any{map[string]any{"role": "user", "parts": []any{map[string]any{"type": "text", "text": "hello"}}}}, "body": body}
	}
	tests := []struct {
		name, path string
		body       any
		status     int
		pointer    string
		message    string
	}{
		{"chat: a value out of the enum", "/v1/agents/demo/chat", chatBody("b1", "m1", "hello", "mode", "sometimes"),
			http.StatusBadRequest, "/mode", "body/mode: value must be one of 'read-only', 'read-write'"},
		{"chat: a nested type", "/v1/agents/demo/chat", chatBody("b2", "m1", "hello", "limits", map[string]any{"max": "ten"}),
			http.StatusBadRequest, "/limits/max", "body/limits/max: got string, want integer"},
		{"chat: an undeclared field", "/v1/agents/demo/chat", chatBody("b3", "m1", "hello", "mood", "x"),
			http.StatusBadRequest, "", "body: additional properties 'mood' not allowed"},
		{"saveMessages", "/v1/agents/demo/sessions/b4/messages", saveBody(map[string]any{"mode": 1}),
			http.StatusBadRequest, "/mode", "body/mode: value must be one of 'read-only', 'read-write'"},
		{"submitMessages", "/v1/agents/demo/sessions/b5/messages", map[string]any{"async": true, "messages": saveBody(nil)["messages"], "body": map[string]any{"mode": "x"}},
			http.StatusBadRequest, "/mode", "body/mode: value must be one of 'read-only', 'read-write'"},
		{"chat: a valid body runs", "/v1/agents/demo/chat", chatBody("b7", "m1", "hello", "mode", "read-only"), http.StatusOK, "", ""},
		{"saveMessages: no body runs", "/v1/agents/demo/sessions/b8/messages", saveBody(nil), http.StatusOK, "", ""},
		{"continue", "/v1/agents/demo/sessions/b8/continue", map[string]any{"body": map[string]any{"mode": "x"}},
			http.StatusBadRequest, "/mode", "body/mode: value must be one of 'read-only', 'read-write'"},
		{"another agent's bodies are not checked", "/v1/agents/other/chat", chatBody("b9", "m1", "hello", "mode", 1), http.StatusOK, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.status == http.StatusOK {
				resp := g.do(http.MethodPost, tt.path, tt.body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d, want 200", resp.StatusCode)
				}
				return
			}
			var got struct{ Code, Message, Pointer string }
			g.doJSON(http.MethodPost, tt.path, tt.body, tt.status, &got)
			if got.Code != CodeInvalidBody || got.Pointer != tt.pointer || got.Message != tt.message {
				t.Errorf("error = %+v, want invalid_body at %q: %q", got, tt.pointer, tt.message)
			}
		})
	}
}
