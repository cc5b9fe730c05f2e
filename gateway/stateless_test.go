package gateway

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway/config"
)

// TestStatelessClientResultRedacted sends a client tool's result holding a
// token back on each stateless endpoint, as the request after the one that
// ended with the call: the basic rule set's toolResult rule redacts the
// token, so the model (the fake upstream's request) sees "[REDACTED]", not
// the token, whether the results end the history or a user message follows
// them; one toolResult decision record is written per new result (the
// earlier call's result, new in an earlier request, is not evaluated
// again), and no audit line holds the token.
func TestStatelessClientResultRedacted(t *testing.T) {
	const secret = `{"answer":"yes","token":"s3cret"}`
	up := newFakeOpenAI(t)
	g := newTestGateway(t, "basic", withUpstream(up, "k", config.Agent{Name: "vault", Model: "up"}))
	cases := []struct {
		name, path string
		body       map[string]any
		headers    []string
	}{
		{"openai", "/v1/chat/completions", statelessOpenAI(secret, false), nil},
		{"openai, then a user message", "/v1/chat/completions", statelessOpenAI(secret, true), nil},
		{"openai stream", "/v1/chat/completions", withField(statelessOpenAI(secret, false), "stream", true), nil},
		{"anthropic", "/v1/messages", statelessAnthropic(secret, false), []string{"anthropic-version", "2023-06-01"}},
		{"anthropic, with a user text", "/v1/messages", statelessAnthropic(secret, true), []string{"anthropic-version", "2023-06-01"}},
		{"anthropic stream", "/v1/messages", withField(statelessAnthropic(secret, false), "stream", true), []string{"anthropic-version", "2023-06-01"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := decisionRecords(t, g, "toolResult")
			resp := g.do("POST", c.path, c.body, c.headers...)
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := string(data)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, fakeAnswer) {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			sent, _ := up.last(t)
			seen := mustJSON(sent["messages"])
			if strings.Contains(seen, "s3cret") || !strings.Contains(seen, `[REDACTED]`) || !strings.Contains(seen, `no`) {
				t.Errorf("the model saw %s, want the token redacted and the earlier result as sent", seen)
			}
			records := decisionRecords(t, g, "toolResult")[len(before):]
			if len(records) != 1 || records[0].Outcome != "matched" {
				t.Errorf("toolResult records %d (%v), want one matched for the new result", len(records), records)
			}
			g.srv.audit.Flush()
			if strings.Contains(g.auditLog(), "s3cret") {
				t.Error("the audit log holds the client's token")
			}
		})
	}
}

// statelessOpenAI is a /v1/chat/completions request whose history has an
// earlier call answered and followed by the assistant's text, then the call
// the last response ended with and its result, then (with more) a user
// message.
func statelessOpenAI(result string, more bool) map[string]any {
	call := func(id string) map[string]any {
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": "confirm", "arguments": `{"question":"Proceed?"}`}}}}
	}
	msgs := []any{
		map[string]any{"role": "user", "content": "please confirm"},
		call("call_1"),
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": `{"answer":"no"}`},
		map[string]any{"role": "assistant", "content": "Asking again."},
		call("call_2"),
		map[string]any{"role": "tool", "tool_call_id": "call_2", "content": result},
	}
	if more {
		msgs = append(msgs, map[string]any{"role": "user", "content": "and now?"})
	}
	return map[string]any{"model": "vault", "tools": []any{confirmTool}, "messages": msgs}
}

// statelessAnthropic is statelessOpenAI's history as a /v1/messages
// request; with more, the last user message has a text after the result.
func statelessAnthropic(result string, more bool) map[string]any {
	call := func(id string) map[string]any {
		return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "confirm",
			"input": map[string]any{"question": "Proceed?"}}}}
	}
	answer := func(id, content string) map[string]any {
		return map[string]any{"type": "tool_result", "tool_use_id": id, "content": content}
	}
	last := []any{answer("toolu_2", result)}
	if more {
		last = append(last, map[string]any{"type": "text", "text": "and now?"})
	}
	return map[string]any{"model": "vault", "max_tokens": 64, "tools": []any{confirmToolAnthropic}, "messages": []any{
		userText("please confirm"),
		call("toolu_1"),
		map[string]any{"role": "user", "content": []any{answer("toolu_1", `{"answer":"no"}`), map[string]any{"type": "text", "text": "ask again"}}},
		map[string]any{"role": "assistant", "content": "Asking again."},
		call("toolu_2"),
		map[string]any{"role": "user", "content": last},
	}}
}

// TestStatelessClientResultFailsClosed: a toolResult rule that fails on a
// client result sent back on a stateless endpoint fails closed: the model
// sees the policy's fixed tool error instead of the result, the turn goes
// on, and the toolResult decision record says error.
func TestStatelessClientResultFailsClosed(t *testing.T) {
	up := newFakeOpenAI(t)
	dir := t.TempDir()
	rule := "package turngate.tool_result\n\nredact contains \"/token\" if {\n\tinput.output.n / 0 > 1\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "results.rego"), []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "basic")
	cfg.Rules.Dir = dir
	withUpstream(up, "k", config.Agent{Name: "vault", Model: "up"})(cfg)
	g := startGateway(t, cfg, Options{})
	const result = `{"n":1,"token":"s3cret"}`
	for _, c := range []struct {
		name, path string
		body       map[string]any
	}{
		{"openai", "/v1/chat/completions", statelessOpenAI(result, false)},
		{"anthropic", "/v1/messages", statelessAnthropic(result, false)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := decisionRecords(t, g, "toolResult")
			resp := g.do("POST", c.path, c.body, "anthropic-version", "2023-06-01")
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			sent, _ := up.last(t)
			seen := mustJSON(sent["messages"])
			if strings.Contains(seen, "s3cret") || !strings.Contains(seen, "its policy could not be evaluated") {
				t.Errorf("the model saw %s, want the policy's tool error instead of the result", seen)
			}
			if records := decisionRecords(t, g, "toolResult")[len(before):]; len(records) != 1 || records[0].Outcome != "error" {
				t.Errorf("toolResult records %v, want one error", records)
			}
		})
	}
}

// withField returns body with key set to v.
func withField(body map[string]any, key string, v any) map[string]any {
	body[key] = v
	return body
}
