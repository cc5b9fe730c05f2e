package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
)

func TestBadInput(t *testing.T) {
	g := newTestGateway(t, "basic", func(c *config.Config) {
		c.Limits.MaxBodyBytes = 4096
		c.Limits.MaxMessages = 3
	})
	user := func(text string) map[string]any {
		return map[string]any{"id": "u", "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}
	}
	const chat = "/v1/agents/demo/chat"
	g.doJSON("POST", "/v1/agents/demo/sessions/c1/messages", map[string]any{"text": "hi"}, http.StatusOK, nil)
	tests := []struct {
		name, method, path string
		body               any
		contentType        string
		want               int
		code               string
	}{
		{"malformed JSON", "POST", chat, `{"id":`, "", 400, CodeInvalidJSON},
		{"not an object", "POST", chat, `[1,2]`, "", 400, CodeInvalidRequest},
		{"empty body", "POST", chat, ``, "", 400, CodeInvalidJSON},
		{"invalid UTF-8", "POST", chat, "{\"id\":\"s\xff\"}", "", 400, CodeInvalidJSON},
		{"messages of the wrong type", "POST", chat, `{"id":"s","messages":"hi"}`, "", 400, CodeInvalidRequest},
		{"text of the wrong type", "POST", chat, `{"id":"s","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":5}]}]}`, "", 400, CodeInvalidRequest},
		{"missing id", "POST", chat, map[string]any{"messages": []any{user("x")}}, "", 400, CodeInvalidRequest},
		{"id with a slash", "POST", chat, map[string]any{"id": "a/b", "messages": []any{user("x")}}, "", 400, CodeInvalidRequest},
		{"no messages", "POST", chat, map[string]any{"id": "s", "messages": []any{}}, "", 400, CodeInvalidRequest},
		{"too many messages", "POST", chat, map[string]any{"id": "s", "messages": []any{user("a"), user("b"), user("c"), user("d")}}, "", 413, CodeTooLarge},
		{"unknown trigger", "POST", chat, map[string]any{"id": "s", "trigger": "nope", "messages": []any{user("x")}}, "", 400, CodeInvalidRequest},
		{"unknown role", "POST", chat, map[string]any{"id": "s", "messages": []any{map[string]any{"id": "u", "role": "robot", "parts": []any{}}}}, "", 400, CodeInvalidRequest},
		{"empty user text", "POST", chat, map[string]any{"id": "s", "messages": []any{user("")}}, "", 400, CodeInvalidRequest},
		{"unknown messageId", "POST", chat, map[string]any{"id": "s", "messageId": "zzz", "messages": []any{user("x")}}, "", 400, CodeInvalidRequest},
		{"body too large", "POST", chat, `{"id":"s","messages":[],"pad":"` + strings.Repeat("x", 5000) + `"}`, "", 413, CodeTooLarge},
		{"wrong content type", "POST", chat, `{}`, "text/plain", 415, CodeUnsupportedType},
		{"unknown agent", "POST", "/v1/agents/nobody/chat", map[string]any{"id": "s", "messages": []any{user("x")}}, "", 404, CodeAgentNotFound},
		{"unknown route", "GET", "/v1/nothing", nil, "", 404, CodeNotFound},
		{"wrong method", "DELETE", chat, nil, "", 405, "method_not_allowed"},
		{"missing session", "GET", "/v1/agents/demo/sessions/none/messages", nil, "", 404, CodeNotFound},
		{"invalid session id", "GET", "/v1/agents/demo/sessions/%20x/messages", nil, "", 404, CodeNotFound},
		{"save: unknown field", "POST", "/v1/agents/demo/sessions/s/messages", map[string]any{"txt": "x"}, "", 400, CodeInvalidRequest},
		{"save: assistant message", "POST", "/v1/agents/demo/sessions/s/messages", map[string]any{"messages": []any{map[string]any{"role": "assistant", "parts": []any{}}}}, "", 400, CodeInvalidRequest},
		{"save: text and messages", "POST", "/v1/agents/demo/sessions/s/messages", map[string]any{"text": "a", "messages": []any{user("b")}}, "", 400, CodeInvalidRequest},
		{"save: async of the wrong type", "POST", "/v1/agents/demo/sessions/s/messages", `{"text":"a","async":"yes"}`, "", 400, CodeInvalidRequest},
		{"save: trailing data", "POST", "/v1/agents/demo/sessions/s/messages", `{"text":"a"} {}`, "", 400, CodeInvalidJSON},
		{"save: unknown agent", "POST", "/v1/agents/nobody/sessions/s/messages", map[string]any{"text": "x"}, "", 404, CodeAgentNotFound},
		{"save: malformed JSON", "POST", "/v1/agents/demo/sessions/s/messages", `{"text":`, "", 400, CodeInvalidJSON},
		{"save: invalid UTF-8", "POST", "/v1/agents/demo/sessions/s/messages", "{\"text\":\"\xc3\x28\"}", "", 400, CodeInvalidJSON},
		{"save: too many messages", "POST", "/v1/agents/demo/sessions/s/messages", map[string]any{"messages": []any{user("a"), user("b"), user("c"), user("d")}}, "", 413, CodeTooLarge},
		{"save: body too large", "POST", "/v1/agents/demo/sessions/s/messages", `{"text":"` + strings.Repeat("x", 5000) + `"}`, "", 413, CodeTooLarge},
		{"save: invalid session id", "POST", "/v1/agents/demo/sessions/a%20b/messages", map[string]any{"text": "x"}, "", 400, CodeInvalidRequest},
		{"save: messages of the wrong type", "POST", "/v1/agents/demo/sessions/s/messages", `{"messages":{"a":1}}`, "", 400, CodeInvalidRequest},
		{"submit: idempotency key too long", "POST", "/v1/agents/demo/sessions/s/messages", map[string]any{"text": "x", "async": true}, "", 400, CodeInvalidRequest},
		{"continue: malformed JSON", "POST", "/v1/agents/demo/sessions/c1/continue", `{"body":`, "", 400, CodeInvalidJSON},
		{"continue: invalid UTF-8", "POST", "/v1/agents/demo/sessions/c1/continue", "{\"body\":{\"k\":\"\xff\"}}", "", 400, CodeInvalidJSON},
		{"continue: body of the wrong type", "POST", "/v1/agents/demo/sessions/c1/continue", `{"body":[1]}`, "", 400, CodeInvalidRequest},
		{"eval: malformed JSON", "POST", "/v1/admin/rules/eval", `{"hook":`, "", 400, CodeInvalidJSON},
		{"eval: hook of the wrong type", "POST", "/v1/admin/rules/eval", `{"hook":1,"input":{}}`, "", 400, CodeInvalidRequest},
		{"continue: unknown field", "POST", "/v1/agents/demo/sessions/c1/continue", map[string]any{"bdy": 1}, "", 400, CodeInvalidRequest},
		{"missing submission", "GET", "/v1/agents/demo/sessions/none/submissions/x", nil, "", 404, CodeNotFound},
		{"eval: no input", "POST", "/v1/admin/rules/eval", map[string]any{"hook": "beforeTurn"}, "", 400, CodeInvalidRequest},
		{"eval: bad input", "POST", "/v1/admin/rules/eval", map[string]any{"hook": "beforeTurn", "input": map[string]any{"nope": 1}}, "", 400, CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.contentType != "" {
				headers = []string{"Content-Type", tc.contentType}
			}
			if strings.HasPrefix(tc.name, "submit: idempotency key") {
				headers = append(headers, "Idempotency-Key", strings.Repeat("k", 257))
			}
			resp := g.do(tc.method, tc.path, tc.body, headers...)
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			var body map[string]any
			if err := json.Unmarshal(data, &body); err != nil {
				t.Fatalf("status %d, body is not JSON: %s", resp.StatusCode, data)
			}
			if resp.StatusCode != tc.want || body["code"] != tc.code {
				t.Errorf("status %d %s, want %d %s", resp.StatusCode, data, tc.want, tc.code)
			}
			if msg, _ := body["message"].(string); msg == "" || strings.Contains(msg, "goroutine") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

func TestPanicIsAnInternalError(t *testing.T) {
	g := newTestGateway(t, "basic")
	g.srv.agents()["demo"] = nil // makes the chat handler dereference nil
	var body map[string]string
	g.doJSON("POST", "/v1/agents/demo/chat", chatBody("s", "u", "x"), http.StatusInternalServerError, &body)
	if body["code"] != CodeInternal || body["message"] != "internal error" {
		t.Errorf("panic answered %v", body)
	}
}

// FuzzDecodeChatRequest checks that no chat body panics the decoder or the
// plan, and that accepted requests satisfy its checks.
func FuzzDecodeChatRequest(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "chat", "*.json"))
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"id":"s","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"hi"}]}],"trigger":"submit-message","x":{"y":[1]}}`))
	f.Add([]byte(`{"id":"s","messages":[{"role":"assistant","parts":[{"type":"tool-x","toolCallId":"c","state":"output-available","output":null}]}],"messageId":null}`))
	f.Add([]byte(`{"id":"s","messages":[{"id":"u","role":"user","parts":[{"type":"file","mediaType":"image/png","url":"data:image/png;base64,AAAA"}]}]}`))
	files := &fileRules{limits: config.Attachments{MaxBytes: 8, MaxCount: 2}}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeChatRequest(data, 100)
		if rejected(t, "decoder", err) {
			return
		}
		req.files = files
		if !validID(req.ID) || len(req.Messages) == 0 || len(req.Messages) > 100 {
			t.Fatalf("accepted an invalid request: %+v", req)
		}
		tx := &transcript{}
		_, err = chatPlan(t.Context(), req, tx)
		rejected(t, "plan", err)
	})
}

// FuzzDecodeOpenAIRequest checks that no chat completions body panics the
// decoding and history conversion, or maps to a 5xx.
func FuzzDecodeOpenAIRequest(f *testing.F) {
	// Small seeds, one feature each (a real request split up): the fuzzer
	// minimizes every new input over each byte range, which is quadratic in
	// its size, so whole requests stall it (as they did FuzzParse in
	// gateway/config). Whole requests are covered by the OpenAI tests.
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"Weather in Paris?"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"w","arguments":"{\"city\":\"Paris\"}"}}]}]}`,
		`{"model":"m","messages":[{"role":"tool","tool_call_id":"c2","content":"{\"city\":\"Paris\"}"}]}`,
		`{"model":"m","tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`,
		`{"model":"m","temperature":0.2,"top_p":1,"n":1,"stop":["a"],"logit_bias":{"1":-100},"seed":7}`,
		`{"model":"m","temperature":"hot","n":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFuzzRequest {
			return
		}
		req, err := decodeOAIRequest(data)
		if rejected(t, "decoder", err) {
			if ae := toAPIError(err); ae.Status != http.StatusBadRequest {
				t.Fatalf("decoder error is a %d: %v", ae.Status, err)
			}
			return
		}
		// What the decoder accepts is well typed and in OpenAI's ranges.
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("accepted a body that is not a JSON object: %v", err)
		}
		for key, bound := range map[string][2]float64{"temperature": {0, 2}, "top_p": {0, 1}, "n": {1, 1}} {
			if v, ok := doc[key]; ok && v != nil {
				if f, ok := v.(float64); !ok || f < bound[0] || f > bound[1] {
					t.Fatalf("accepted %s: %v", key, v)
				}
			}
		}
		msgs, err := req.toUIMessages()
		if rejected(t, "conversion", err) {
			return
		}
		if len(msgs) != len(req.Messages)-countRole(req.Messages, "tool") {
			t.Fatalf("%d UI messages from %d OpenAI messages", len(msgs), len(req.Messages))
		}
		_, err = req.clientTools(nil)
		rejected(t, "tools", err)
	})
}

// maxFuzzRequest bounds FuzzDecodeOpenAIRequest's inputs so minimizing a
// new one stays fast; the decoder's size limit is tested by TestBadInput.
const maxFuzzRequest = 512

func countRole(msgs []oaiMessage, role string) int {
	n := 0
	for _, m := range msgs {
		if m.Role == role {
			n++
		}
	}
	return n
}

// FuzzDecodeSaveRequest checks the saveMessages decoder: only user
// messages with text or valid files within the limits come out.
func FuzzDecodeSaveRequest(f *testing.F) {
	f.Add([]byte(`{"text":"hello","body":{"mode":"read-only"},"async":true}`))
	f.Add([]byte(`{"messages":[{"id":"m1","role":"user","parts":[{"type":"text","text":"a"},{"type":"file","url":"x"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","parts":[{"type":"file","mediaType":"image/png","url":"data:image/png;base64,AAAA","filename":"a.png"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","parts":[{"type":"file","mediaType":"image/png","url":"https://example.com/a.png"}]}]}`))
	files := &fileRules{limits: config.Attachments{MaxBytes: 8, MaxCount: 2, AllowedMediaTypes: []string{"image/*"}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeSaveRequest(context.Background(), data, 10, files)
		if rejected(t, "decoder", err) {
			return
		}
		for _, m := range req.Messages {
			if m.Role != "user" || !validID(m.ID) || len(m.Parts) == 0 {
				t.Fatalf("accepted message %+v", m)
			}
			nfiles := 0
			for _, p := range m.Parts {
				switch {
				case p.Type == "text" && p.Text != "":
				case p.Type == "file" && strings.HasPrefix(p.MediaType, "image/"):
					nfiles++
					if a := engine.Attachments([]engine.UIMessage{{Role: "user", Parts: []engine.UIPart{p}}}); a[0].Size > 8 || (a[0].Size < 0 && !a[0].Remote) {
						t.Fatalf("accepted file %+v", a[0])
					}
				default:
					t.Fatalf("accepted part %+v", p)
				}
			}
			if nfiles > 2 {
				t.Fatalf("accepted %d files", nfiles)
			}
		}
	})
}

// rejected reports whether err is set, failing the fuzz input when what's
// error would be answered with a 5xx.
func rejected(t *testing.T, what string, err error) bool {
	if err != nil && toAPIError(err).Status >= 500 {
		t.Fatalf("%s error maps to a 5xx: %v", what, err)
	}
	if err != nil && goTypeName.MatchString(toAPIError(err).Message) {
		t.Fatalf("%s error names a Go type: %v", what, err)
	}
	return err != nil
}

// goTypeName matches what Go's decoders say of the gateway's types ("Go
// struct field", "engine.UIPart", "[]string", "map[string]any"), which a
// 400 must not repeat.
var goTypeName = regexp.MustCompile(`Go (struct|value)|\b(engine|gateway|store|config|json|time|policy|uistream)\.[A-Z]|\[\][a-z*]|map\[[a-z]`)

// TestClientLeftIsNotAnError checks that a request whose client went away
// (its context cancelled) is logged at debug, not as a server error, while
// the same cancellation of a live request still is an error.
func TestClientLeftIsNotAnError(t *testing.T) {
	for _, tt := range []struct {
		name       string
		clientGone bool
		want       slog.Level
	}{
		{"client left", true, slog.LevelDebug},
		{"client still there", false, slog.LevelError},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var logged bytes.Buffer
			s := &Server{log: slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			ctx, cancel := context.WithCancel(t.Context())
			if tt.clientGone {
				cancel()
			} else {
				defer cancel()
			}
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequestWithContext(ctx, "GET", "/v1/agents/demo/chat/s/stream", nil)
			s.writeError(c, fmt.Errorf("reading stream: %w", context.Canceled))
			var rec struct{ Level string }
			if err := json.Unmarshal(logged.Bytes(), &rec); err != nil {
				t.Fatalf("log %q: %v", logged.String(), err)
			}
			if rec.Level != tt.want.String() {
				t.Errorf("logged at %s, want %s: %s", rec.Level, tt.want, logged.String())
			}
			if w.Code != http.StatusServiceUnavailable {
				t.Errorf("answered %d, want 503", w.Code)
			}
		})
	}
}
