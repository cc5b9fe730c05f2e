package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/internal/replay"
	"github.com/turngate/turngate/engine/provider/internal/wire"
	"github.com/turngate/turngate/internal/golden"
)

func ptr[T any](v T) *T { return &v }

func userMsg(text string) engine.ModelMessage {
	return engine.ModelMessage{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentText, Text: text}}}
}

var weatherTool = engine.ToolInfo{Name: "get_weather", Description: "Get the current weather for a city", Kind: engine.ToolKindHTTP,
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}

// TestStreamFixtures replays every captured response in testdata/responses
// and compares the parts (or the error) with testdata/golden.
func TestStreamFixtures(t *testing.T) {
	files, _ := filepath.Glob("testdata/responses/*.http")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".http")
		t.Run(name, func(t *testing.T) {
			srv := replay.NewServer(t, f)
			p := New(Config{BaseURL: srv.URL, APIKey: "sk-ant-test"})
			st, err := p.Stream(context.Background(), &engine.ModelRequest{Model: "m", Messages: []engine.ModelMessage{userMsg("Weather in Paris?")}})
			var got string
			if err != nil {
				got = "stream: " + replay.RenderError(err) + "\n"
			} else {
				got = replay.Render(st)
			}
			golden.Check(t, filepath.Join("testdata", "golden", name+".txt"), got)
		})
	}
}

func TestUpstreamErrors(t *testing.T) {
	tests := []struct {
		fixture string
		want    engine.UpstreamError
	}{
		{"rate_limited", engine.UpstreamError{Status: 429, Retryable: true, RetryAfter: 12 * time.Second,
			Message: "rate_limit_error: Number of request tokens has exceeded your per-minute rate limit"}},
		{"overloaded", engine.UpstreamError{Status: 529, Retryable: true, Message: "overloaded_error: Overloaded"}},
		{"server_error", engine.UpstreamError{Status: 500, Retryable: true, Message: "api_error: Internal server error"}},
		{"bad_request", engine.UpstreamError{Status: 400, Message: "invalid_request_error: max_tokens: Field required"}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			replay.CheckUpstreamError(t, filepath.Join("testdata", "responses", tt.fixture+".http"), tt.want, start)
		})
	}
}

// TestRequestBody checks the exact body and headers the server receives.
func TestRequestBody(t *testing.T) {
	tests := []struct {
		name         string
		cfg          Config
		req          engine.ModelRequest
		wantWarnings int
	}{
		{"every_field", Config{APIKey: "sk-ant", Headers: map[string]string{"Anthropic-Beta": "b1", "X-Override": "config"}},
			engine.ModelRequest{
				Model: "claude-test", System: "Be brief.", Messages: []engine.ModelMessage{
					{Role: engine.RoleSystem, Content: []engine.ContentPart{{Type: engine.ContentText, Text: "Answer in English."}}},
					userMsg("Weather in Paris?")},
				Tools:           []engine.ToolInfo{weatherTool, {Name: "now", Kind: engine.ToolKindBuiltin}},
				ToolChoice:      &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: "get_weather"},
				MaxOutputTokens: ptr(1024), Temperature: ptr(0.5), TopP: ptr(0.9), TopK: ptr(40),
				PresencePenalty: ptr(0.1), FrequencyPenalty: ptr(0.2), Seed: ptr(int64(3)), StopSequences: []string{"END"},
				Headers: map[string]string{"X-Override": "request"},
				ProviderOptions: map[string]any{"anthropic": map[string]any{
					"thinking": map[string]any{"type": "enabled", "budget_tokens": 512}}, "openai": map[string]any{"ignored": true}},
				Output: &engine.OutputSpec{Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
			}, 3},
		{"tool_round_trip", Config{}, engine.ModelRequest{
			Model: "mock-model", Tools: []engine.ToolInfo{weatherTool},
			ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceRequired},
			Messages: []engine.ModelMessage{
				userMsg("Weather in Paris?"),
				{Role: engine.RoleAssistant, Content: []engine.ContentPart{
					{Type: engine.ContentReasoning, Text: "Considering the request.", ProviderMetadata: json.RawMessage(`{"anthropic":{"signature":"sig_mock"}}`)},
					{Type: engine.ContentReasoning, Text: "unsigned reasoning is not sent back"},
					{Type: engine.ContentReasoning, ProviderMetadata: json.RawMessage(`{"anthropic":{"redactedData":"EmwKAhgB"}}`)},
					{Type: engine.ContentText, Text: "Let me check."},
					{Type: engine.ContentToolCall, ToolCallID: "toolu_0004", ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
					{Type: engine.ContentToolCall, ToolCallID: "toolu_0005", ToolName: "get_weather", Input: json.RawMessage(`{"city": tru`)},
				}},
				{Role: engine.RoleTool, Content: []engine.ContentPart{
					{Type: engine.ContentToolResult, ToolCallID: "toolu_0004", ToolName: "get_weather", Output: json.RawMessage(`{"city":"Paris","weather":"sunny"}`)},
					{Type: engine.ContentToolResult, ToolCallID: "toolu_0005", ToolName: "get_weather", Output: json.RawMessage(`"invalid input"`), IsError: true},
				}},
				userMsg("And tomorrow?"),
			}}, 0},
		{"files", Config{}, engine.ModelRequest{Model: "claude-test", Messages: []engine.ModelMessage{
			{Role: engine.RoleUser, Content: []engine.ContentPart{
				{Type: engine.ContentText, Text: "What is in these?"},
				{Type: engine.ContentFile, MediaType: "image/png", URL: "data:image/png;base64,iVBORw0KGgo=", Filename: "dot.png"},
				{Type: engine.ContentFile, MediaType: "image/jpeg", URL: "https://example.com/cat.jpg"},
				{Type: engine.ContentFile, MediaType: "application/pdf", URL: "data:application/pdf;base64,JVBERi0xLjQK", Filename: "report.pdf"},
				{Type: engine.ContentFile, MediaType: "application/pdf", URL: "https://example.com/paper.pdf"},
				{Type: engine.ContentFile, MediaType: "text/plain", URL: "data:text/plain;charset=utf-8,hello%20notes", Filename: "notes.txt"},
				// RFC 2397 schemes are case-insensitive: the source is the same base64.
				{Type: engine.ContentFile, MediaType: "image/png", URL: "DATA:image/png;BASE64,iVBORw0KGgo="},
			}},
		}}, 0},
		{"defaults", Config{MaxTokens: 2048}, engine.ModelRequest{Model: "m", Messages: []engine.ModelMessage{userMsg("Hi")},
			ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceNone}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay.NewServer(t, "testdata/responses/text_cache_stop_sequence.http")
			tt.cfg.BaseURL = srv.URL + "/"
			st, err := New(tt.cfg).Stream(context.Background(), &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var warnings []string
			for st.Next() {
				warnings = append(warnings, st.Current().Warnings...)
			}
			if len(warnings) != tt.wantWarnings {
				t.Errorf("warnings = %q, want %d", warnings, tt.wantWarnings)
			}
			got := srv.Received()
			if len(got) != 1 {
				t.Fatalf("server got %d requests", len(got))
			}
			r := got[0]
			if r.Method != http.MethodPost || r.Path != "/v1/messages" {
				t.Errorf("request = %s %s", r.Method, r.Path)
			}
			wantHeaders := map[string]string{"Content-Type": "application/json", "Anthropic-Version": DefaultVersion, "X-Api-Key": tt.cfg.APIKey}
			for k, v := range tt.cfg.Headers {
				wantHeaders[k] = v
			}
			for k, v := range tt.req.Headers {
				wantHeaders[k] = v
			}
			for k, v := range wantHeaders {
				if got := r.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			golden.CheckJSON(t, filepath.Join("testdata", "requests", tt.name+".json"), r.Body)
		})
	}
}

// start opens a stream of a one-message request against baseURL.
func start(ctx context.Context, baseURL string) (engine.Stream, error) {
	return New(Config{BaseURL: baseURL}).Stream(ctx, &engine.ModelRequest{Model: "m"})
}

// TestCancelStopsStream cancels while the server holds the stream open.
func TestCancelStopsStream(t *testing.T) {
	first := "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	// The first event makes one part: text-start.
	replay.CheckCancel(t, first, 1, start)
}

// TestCloseMidStream: a consumer that stops early gets no error.
func TestCloseMidStream(t *testing.T) {
	srv := replay.NewServer(t, "testdata/responses/thinking_text_tool.http")
	st, err := New(Config{BaseURL: srv.URL}).Stream(context.Background(), &engine.ModelRequest{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	st.Next()
	st.Close()
	if st.Next() {
		t.Error("Next after Close returned a part")
	}
	if err := st.Err(); err != nil {
		t.Errorf("Err after Close = %v", err)
	}
}

// FuzzStreamParser feeds arbitrary bodies through the event handler: it
// must end (finish part or error) without panicking.
func FuzzStreamParser(f *testing.F) {
	replay.SeedBodies(f, "testdata/responses/*.http")
	f.Fuzz(func(t *testing.T, body []byte) {
		replay.CheckEnding(t, wire.NewStream(context.Background(), io.NopCloser(bytes.NewReader(body)), &handler{name: "anthropic"}))
	})
}

func BenchmarkStreamThinkingTextTool(b *testing.B) {
	body := replay.Body(b, "testdata/responses/thinking_text_tool.http")
	for b.Loop() {
		st := wire.NewStream(context.Background(), io.NopCloser(bytes.NewReader(body)), &handler{name: "anthropic"})
		for st.Next() {
		}
		if st.Err() != nil {
			b.Fatal(st.Err())
		}
	}
}

// TestUnsupportedFiles: a file the API does not take fails the request
// before anything is sent, naming the media type; CheckFile agrees.
func TestUnsupportedFiles(t *testing.T) {
	p := New(Config{BaseURL: "http://127.0.0.1:1"})
	for _, mt := range []string{"application/zip", "audio/wav", "image/svg+xml"} {
		_, err := p.Stream(context.Background(), &engine.ModelRequest{Model: "m", Messages: []engine.ModelMessage{
			{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentFile, MediaType: mt, URL: "data:" + mt + ";base64,AAAA"}}}}})
		want := `does not accept "` + mt + `"`
		var ue *engine.UpstreamError
		if !errors.As(err, &ue) || ue.Retryable || !strings.Contains(ue.Message, want) {
			t.Errorf("%s: error %v, want a non-retryable error containing %q", mt, err, want)
		}
		if err := p.CheckFile(mt, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckFile(%s) = %v", mt, err)
		}
	}
}
