package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools"
	"github.com/turngate/turngate/engine/tools/httptool"
	"github.com/turngate/turngate/gateway/anthropic"
	"github.com/turngate/turngate/gateway/config"
	goldenfile "github.com/turngate/turngate/internal/golden"
)

// confirmToolAnthropic is a client tool as a Messages request declares it.
var confirmToolAnthropic = map[string]any{"name": "confirm", "description": "Ask the user.",
	"input_schema": map[string]any{"type": "object", "properties": map[string]any{"question": map[string]any{"type": "string"}}}}

// antMessage is a Messages response as the tests read it.
type antMessage struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Role       string `json:"role"`
	Model      string `json:"model"`
	StopReason string `json:"stop_reason"`
	Content    []struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Input     json.RawMessage `json:"input"`
	} `json:"content"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

func (m antMessage) text() string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func userText(text string) map[string]any { return map[string]any{"role": "user", "content": text} }

// TestAnthropicMessages: a non-streaming turn of a server tool answers
// text; a declared tool comes back as tool_use; its tool_result, sent back
// in a user message, continues the turn; system as blocks is taken.
func TestAnthropicMessages(t *testing.T) {
	g := newTestGateway(t, "basic")
	var out antMessage
	g.doJSON("POST", "/v1/messages", map[string]any{"model": "demo", "max_tokens": 1024,
		"system":   []any{map[string]any{"type": "text", "text": "Be brief."}},
		"messages": []any{userText("weather in Paris")}}, http.StatusOK, &out, "anthropic-version", "2023-06-01")
	if out.Type != "message" || out.Role != "assistant" || out.Model != "demo" || !strings.HasPrefix(out.ID, "msg_") ||
		out.StopReason != "end_turn" || !strings.Contains(out.text(), "Here is the weather") || out.Usage.OutputTokens == 0 {
		t.Fatalf("response %+v", out)
	}
	for _, c := range out.Content {
		if c.Type != "text" {
			t.Errorf("a server tool's call reached the client: %+v", c)
		}
	}

	req := map[string]any{"model": "other", "max_tokens": 1024, "tools": []any{confirmToolAnthropic},
		"messages": []any{userText("please confirm")}}
	g.doJSON("POST", "/v1/messages", req, http.StatusOK, &out)
	last := out.Content[len(out.Content)-1]
	if out.StopReason != "tool_use" || last.Type != "tool_use" || last.Name != "confirm" || last.ID == "" || string(last.Input) != `{"question":"Proceed?"}` {
		t.Fatalf("client tool: %+v", out)
	}
	assistant := map[string]any{"role": "assistant", "content": out.Content}
	req["messages"] = []any{userText("please confirm"), assistant,
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": last.ID, "content": `"yes"`}}}}
	g.doJSON("POST", "/v1/messages", req, http.StatusOK, &out)
	if out.StopReason != "end_turn" || !strings.Contains(out.text(), "You answered: yes") {
		t.Errorf("after the tool result: %+v", out)
	}
}

// antIDs are the per-response ids a golden stream masks.
var antIDs = regexp.MustCompile(`"msg_[0-9A-Za-z_-]+"`)

// postAnthropicStream posts a streaming request and returns the raw SSE body
// with the message id masked.
func postAnthropicStream(t *testing.T, g *testGateway, body map[string]any) string {
	t.Helper()
	body["stream"] = true
	resp := g.do("POST", "/v1/messages", body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	return antIDs.ReplaceAllString(string(data), `"msg_ID"`)
}

// thinkingStream is an Anthropic upstream's answer with a signed thinking
// block before its text.
const thinkingStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":9,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Considering the request."}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig_upstream"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Forty-two."}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}

event: message_stop
data: {"type":"message_stop"}

`

// overloadedStream is an upstream answer that fails after its first text.
const overloadedStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_up","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":9,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Partial"}}

event: error
data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}

`

// TestAnthropicStreamGolden pins the event streams of POST /v1/messages
// with stream: true (protocols.md B.2) in golden files: text blocks of a
// turn whose server tool ran inside the gateway; a client tool as a
// tool_use block with input_json_delta; a signed thinking block relayed
// from an Anthropic upstream; an error event after the 200.
func TestAnthropicStreamGolden(t *testing.T) {
	thinking, failing := newFakeUpstream(t, thinkingStream), newFakeUpstream(t, overloadedStream)
	g := newTestGateway(t, "basic", func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "think", Type: config.ProviderAnthropic, BaseURL: thinking.URL},
			config.Provider{Name: "failing", Type: config.ProviderAnthropic, BaseURL: failing.URL})
		c.Models["think"] = config.Model{Provider: "think", Model: "claude-test"}
		c.Models["failing"] = config.Model{Provider: "failing", Model: "claude-test"}
		c.Agents = append(c.Agents, config.Agent{Name: "think", Model: "think"}, config.Agent{Name: "failing", Model: "failing", MaxRetries: new(int)})
	})
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"text", map[string]any{"model": "demo", "max_tokens": 100, "messages": []any{userText("weather in Paris")}}},
		{"tool_use", map[string]any{"model": "other", "max_tokens": 100, "tools": []any{confirmToolAnthropic}, "messages": []any{userText("please confirm")}}},
		{"thinking", map[string]any{"model": "think", "max_tokens": 100, "messages": []any{userText("the answer?")}}},
		{"error", map[string]any{"model": "failing", "max_tokens": 100, "messages": []any{userText("the answer?")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goldenfile.Check(t, filepath.Join("testdata", "golden", "anthropic_"+tc.name+".sse"), postAnthropicStream(t, g, tc.body))
		})
	}
	// The client sends the signed thinking block back: the upstream gets
	// it with its signature.
	var out antMessage
	g.doJSON("POST", "/v1/messages", map[string]any{"model": "think", "max_tokens": 100, "messages": []any{
		userText("the answer?"),
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "thinking", "thinking": "Considering the request.", "signature": "sig_upstream"},
			map[string]any{"type": "text", "text": "Forty-two."}}},
		userText("why?")}}, http.StatusOK, &out)
	if len(out.Content) != 2 || out.Content[0].Type != "thinking" || out.Content[0].Signature != "sig_upstream" || out.Content[1].Text != "Forty-two." {
		t.Errorf("non-streaming thinking: %+v", out)
	}
	reqs := thinking.requests()
	if sent := string(reqs[len(reqs)-1]); !strings.Contains(sent, `{"signature":"sig_upstream","thinking":"Considering the request.","type":"thinking"}`) {
		t.Errorf("the upstream did not get the signed thinking block back: %s", sent)
	}
}

// TestAnthropicErrors: every refusal is Anthropic's error body with its
// status and type, a request-id and, for what a retry may fix, Retry-After.
func TestAnthropicErrors(t *testing.T) {
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	cfg.Limits.MaxMessages = 3
	g := startGateway(t, cfg, Options{})
	acme := g.as(ksAcmeKey)
	ok := map[string]any{"model": "demo", "max_tokens": 10, "messages": []any{userText("hello")}}
	for _, tc := range []struct {
		name    string
		g       *testGateway
		body    any
		headers []string
		status  int
		typ     string
		message string
	}{
		{"no key", g, ok, nil, 401, "authentication_error", "missing bearer API key"},
		{"bad x-api-key", g, ok, []string{"x-api-key", "nope"}, 401, "authentication_error", "invalid API key"},
		{"two keys", acme, ok, []string{"x-api-key", ksGlobexKey}, 401, "authentication_error", "x-api-key and Authorization carry different API keys"},
		{"malformed JSON", acme, `{"model":`, nil, 400, "invalid_request_error", "malformed JSON"},
		{"not an object", acme, `[]`, nil, 400, "invalid_request_error", "must be one JSON object, got JSON array"},
		{"misspelt field", acme, map[string]any{"model": "demo", "max_token": 10, "messages": []any{userText("hi")}}, nil, 400, "invalid_request_error",
			`field max_token: is not a known field; did you mean "max_tokens"?`},
		{"wrong type", acme, map[string]any{"model": "demo", "max_tokens": 10, "messages": []any{map[string]any{"role": "user", "content": 5}}}, nil, 400, "invalid_request_error",
			"field messages[0].content: expected a string or an array of content blocks, got JSON number 5"},
		{"bad block", acme, map[string]any{"model": "demo", "max_tokens": 10, "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "video"}}}}}, nil, 400, "invalid_request_error",
			"field messages[0].content[0].type: must be one of"},
		{"no max_tokens", acme, map[string]any{"model": "demo", "messages": []any{userText("hi")}}, nil, 400, "invalid_request_error", "field max_tokens: is required"},
		{"bad role", acme, map[string]any{"model": "demo", "max_tokens": 1, "messages": []any{map[string]any{"role": "system", "content": "x"}}}, nil, 400, "invalid_request_error",
			`field messages[0].role: must be user or assistant, not "system"`},
		{"orphan tool_result", acme, map[string]any{"model": "demo", "max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_x", "content": "hi"}}}}}, nil, 400, "invalid_request_error",
			"field messages[0].content[0].tool_use_id: names no tool_use block"},
		{"image in a tool_result", acme, map[string]any{"model": "demo", "max_tokens": 1, "messages": []any{
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "shot", "input": map[string]any{}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{
				map[string]any{"type": "text", "text": "the screenshot:"},
				map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "AAAA"}}}}}}}}, nil, 400, "invalid_request_error",
			"field messages[1].content[0].content[1]: a tool_result's content may hold text blocks only, not image"},
		{"shadowing tool", acme, map[string]any{"model": "demo", "max_tokens": 1, "tools": []any{map[string]any{"name": "weather", "input_schema": map[string]any{}}},
			"messages": []any{userText("hi")}}, nil, 400, "invalid_request_error", `field tools[0].name: "weather" is a server tool of this agent`},
		{"server tool type", acme, map[string]any{"model": "demo", "max_tokens": 1, "tools": []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}},
			"messages": []any{userText("hi")}}, nil, 400, "invalid_request_error", "field tools[0].type: only custom tools are supported"},
		{"unknown tool_choice", acme, map[string]any{"model": "demo", "max_tokens": 1, "tool_choice": map[string]any{"type": "tool", "name": "nope"},
			"messages": []any{userText("hi")}}, nil, 400, "invalid_request_error", `field tool_choice.name: names no tool of this request or agent: "nope"`},
		{"bad image", acme, map[string]any{"model": "demo", "max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/tiff", "data": "AAAA"}}}}}}, nil, 400, "invalid_request_error",
			"field messages[0].content[0].source.media_type: must be image/jpeg"},
		{"too many files", acme, map[string]any{"model": "demo", "max_tokens": 1, "messages": []any{map[string]any{"role": "user", "content": slices.Repeat([]any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "AAAA"}}}, 5)}}}, nil, 400, "invalid_request_error",
			"field messages[0].content: 5 files is more than the limit of 4 (limits.attachments.maxCount)"},
		{"unknown model", acme, map[string]any{"model": "gpt-9", "max_tokens": 1, "messages": []any{userText("hi")}}, nil, 404, "not_found_error", "The model `gpt-9` does not exist"},
		{"too many messages", acme, map[string]any{"model": "demo", "max_tokens": 1, "messages": []any{userText("a"), userText("b"), userText("c"), userText("d")}}, nil, 413, "request_too_large",
			"4 messages is more than the limit of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.g.do("POST", "/v1/messages", tc.body, tc.headers...)
			defer resp.Body.Close()
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type, Message string
				} `json:"error"`
				RequestID string `json:"request_id"`
			}
			data, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(data, &body); err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			if resp.StatusCode != tc.status || body.Type != "error" || body.Error.Type != tc.typ || !strings.Contains(body.Error.Message, tc.message) {
				t.Errorf("status %d %s, want %d %s with %q", resp.StatusCode, data, tc.status, tc.typ, tc.message)
			}
			if body.RequestID == "" || resp.Header.Get("request-id") != body.RequestID {
				t.Errorf("request-id header %q, body %q", resp.Header.Get("request-id"), body.RequestID)
			}
			if resp.Header.Get("x-should-retry") != "false" {
				t.Errorf("x-should-retry %q on a %d", resp.Header.Get("x-should-retry"), resp.StatusCode)
			}
		})
	}
	// x-api-key alone authenticates, as Anthropic's older clients send it.
	var out antMessage
	g.doJSON("POST", "/v1/messages", ok, http.StatusOK, &out, "x-api-key", ksAcmeKey, "anthropic-version", "2099-01-01")
	// The same key in both headers is one key.
	acme.doJSON("POST", "/v1/messages", ok, http.StatusOK, &out, "x-api-key", ksAcmeKey)
}

// TestAnthropicTurnErrors pins down API.md's table of failed turns on
// /v1/messages: oaiTurnError's classes on Anthropic's statuses.
func TestAnthropicTurnErrors(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		status int
		typ    string
		retry  bool
		after  time.Duration
	}{
		{"upstream rate limit", &engine.UpstreamError{Status: 429, Retryable: true, RetryAfter: 1500 * time.Millisecond}, 429, "rate_limit_error", true, 1500 * time.Millisecond},
		{"model timeout", fmt.Errorf("step 0: %w", engine.ErrModelTimeout), 504, "timeout_error", true, 0},
		{"upstream 503", &engine.UpstreamError{Status: 503, Retryable: true, RetryAfter: time.Second}, 529, "overloaded_error", true, time.Second},
		{"upstream 529", &engine.UpstreamError{Status: 529, Retryable: true}, 529, "overloaded_error", true, 0},
		{"upstream 401", &engine.UpstreamError{Status: 401}, 500, "api_error", false, 0},
		{"policy failure", errors.New("rules broken"), 500, "api_error", false, 0},
		{"refused", &engine.TurnRefusedError{Reason: "no"}, 403, "permission_error", false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ae := anthropicTurnError(tt.err, maskedErrorText)
			typ := anthropic.ErrorType(ae.Status)
			if ae.Status != tt.status || typ != tt.typ || ae.Retryable != tt.retry || ae.RetryAfter != tt.after {
				t.Errorf("anthropicTurnError = %+v (%s), want %d %s retryable %t after %v", ae, typ, tt.status, tt.typ, tt.retry, tt.after)
			}
		})
	}
}

// TestAnthropicStreamPings: a stream whose model called a server tool is
// answered at once with message_start and its ping, and while the tool is
// held (it answers only once the test saw pings during the call) the
// stream gets ping events (Options.AnthropicPing, shortened here) and
// nothing else; then the tool's answer is streamed and the message ends.
func TestAnthropicStreamPings(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var enterOnce, releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	tool := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enterOnce.Do(func() { close(entered) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"held":"done"}`)
	}))
	defer tool.Close()
	cfg := testConfig(t, "basic")
	cfg.Tools = append(cfg.Tools, config.Tool{Config: tools.Config{Name: "hold", HTTP: &httptool.Config{URL: tool.URL}}})
	cfg.Agents = append(cfg.Agents, config.Agent{Name: "holder", Model: "demo", Tools: []string{"hold"}})
	g := startGateway(t, cfg, Options{AnthropicPing: 10 * time.Millisecond})

	// A generous watchdog instead of a hang: the tool is let go, and the
	// stream's checks below fail on what it then holds.
	watchdog := time.AfterFunc(time.Minute, free)
	defer watchdog.Stop()
	resp := g.do("POST", "/v1/messages", map[string]any{"model": "holder", "max_tokens": 100, "stream": true,
		"messages": []any{userText("hold the line")}})
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	// next returns the next event's type; text collects the text deltas.
	lines := bufio.NewScanner(resp.Body)
	var text strings.Builder
	next := func() string {
		t.Helper()
		for lines.Scan() {
			if typ, ok := strings.CutPrefix(lines.Text(), "event: "); ok {
				return typ
			}
			var ev struct {
				Delta struct{ Text string } `json:"delta"`
			}
			if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok && json.Unmarshal([]byte(data), &ev) == nil {
				text.WriteString(ev.Delta.Text)
			}
		}
		t.Fatalf("the stream ended (%v)", lines.Err())
		return ""
	}
	if a, b := next(), next(); a != "message_start" || b != "ping" {
		t.Fatalf("the stream starts with %s, %s; want message_start, ping", a, b)
	}
	<-entered
	for range 2 {
		if typ := next(); typ != "ping" {
			t.Fatalf("event %s while the tool is held, want ping", typ)
		}
	}
	free()
	var rest []string
	for typ := next(); typ != "message_stop"; typ = next() {
		if typ != "ping" {
			rest = append(rest, typ)
		}
	}
	if len(rest) < 3 || rest[0] != "content_block_start" || !slices.Equal(rest[len(rest)-2:], []string{"content_block_stop", "message_delta"}) {
		t.Errorf("after the tool: %v, want the answer's text block and message_delta", rest)
	}
	if got, want := text.String(), `The hold tool returned: {"held":"done"}`; got != want {
		t.Errorf("the answer %q, want %q", got, want)
	}
}

// TestStatelessCutOff: an ephemeral turn cut off by limits.turnTimeout or
// by shutdown is a failure on both stateless endpoints, never a 200
// end_turn/stop that a truncated answer would pass for: 504 (timeout) or
// 529/503 (shutting down) before any content, the stream's error after.
func TestStatelessCutOff(t *testing.T) {
	type endpoint struct {
		path string
		body func(stream bool) map[string]any
		// errorOf reads an error body's or error event's type or code.
		errorOf func(data string) string
		timeout string
	}
	anthropicErr := func(data string) string {
		var b struct {
			Error struct{ Type string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(data), &b)
		return b.Error.Type
	}
	openaiErr := func(data string) string {
		var b struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal([]byte(data), &b)
		return b.Error.Code
	}
	endpoints := map[string]endpoint{
		"messages": {"/v1/messages", func(stream bool) map[string]any {
			return map[string]any{"model": "slow", "max_tokens": 100, "stream": stream, "messages": []any{userText("tell me a long story")}}
		}, anthropicErr, "timeout_error"},
		"completions": {"/v1/chat/completions", func(stream bool) map[string]any {
			return map[string]any{"model": "slow", "stream": stream, "messages": []any{map[string]any{"role": "user", "content": "tell me a long story"}}}
		}, openaiErr, "turn_timeout"},
	}
	// lastData is the last data payload of an SSE body.
	lastData := func(r io.Reader) string {
		payloads, _ := sseEvents(t, r)
		if len(payloads) == 0 {
			return ""
		}
		return payloads[len(payloads)-1]
	}
	for name, ep := range endpoints {
		t.Run(name+"/turnTimeout", func(t *testing.T) {
			cfg := testConfig(t, "basic")
			cfg.Limits.TurnTimeout = 200 * time.Millisecond
			g := startGateway(t, cfg, Options{})
			resp := g.do("POST", ep.path, ep.body(false))
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusGatewayTimeout || ep.errorOf(string(data)) != ep.timeout {
				t.Errorf("non-streaming: %d %s, want 504 %s", resp.StatusCode, data, ep.timeout)
			}
			// Whether the first text came before the timeout depends on the
			// machine: either way the answer is the timeout.
			resp = g.do("POST", ep.path, ep.body(true))
			defer resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				if last := lastData(resp.Body); ep.errorOf(last) != ep.timeout {
					t.Errorf("the stream ends with %s, want its %s error", last, ep.timeout)
				}
			case http.StatusGatewayTimeout:
				if data, _ := io.ReadAll(resp.Body); ep.errorOf(string(data)) != ep.timeout {
					t.Errorf("streaming: 504 %s, want %s", data, ep.timeout)
				}
			default:
				t.Errorf("streaming: status %d, want 200 with an error event or 504", resp.StatusCode)
			}
		})
		t.Run(name+"/shutdown", func(t *testing.T) {
			// A shutdown past its grace waits up to store.timeout for the
			// decision records' flush: kept short.
			g := newTestGateway(t, "basic", func(c *config.Config) { c.Store.Timeout = time.Second })
			resp := g.do("POST", ep.path, ep.body(true))
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			br := bufio.NewReader(resp.Body)
			readUntil(t, br, "Once")
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // no grace: the turn is cut off at once
			srv, down := g.srv, make(chan struct{})
			go func() { _ = srv.Shutdown(ctx); close(down) }()
			defer func() { <-down }()
			want := map[string]string{"messages": "overloaded_error", "completions": CodeUnavailable}[name]
			if last := lastData(br); ep.errorOf(last) != want {
				t.Errorf("the stream ends with %s, want its %s error", last, want)
			}
		})
	}
}

// TestAnthropicRequestIDHeader: every /v1/messages response — a message,
// a stream, an error — carries request-id, the X-Request-Id, which the
// SDKs read as request_id.
func TestAnthropicRequestIDHeader(t *testing.T) {
	g := newTestGateway(t, "basic")
	for _, tt := range []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"message", map[string]any{"model": "demo", "max_tokens": 100, "messages": []any{userText("hello")}}, http.StatusOK},
		{"stream", map[string]any{"model": "demo", "max_tokens": 100, "stream": true, "messages": []any{userText("hello")}}, http.StatusOK},
		{"error", map[string]any{"model": "demo", "max_tokens": 100, "messages": 5}, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, sent := range []string{"req-ant-" + tt.name, ""} {
				var headers []string
				if sent != "" {
					headers = []string{"X-Request-Id", sent}
				}
				resp := g.do("POST", "/v1/messages", tt.body, headers...)
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				id := resp.Header.Get("request-id")
				if resp.StatusCode != tt.status || id == "" || id != resp.Header.Get("X-Request-Id") || (sent != "" && id != sent) {
					t.Errorf("sent %q: status %d, request-id %q, X-Request-Id %q", sent, resp.StatusCode, id, resp.Header.Get("X-Request-Id"))
				}
			}
		})
	}
}
