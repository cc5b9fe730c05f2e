package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}

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
			p := New(Config{BaseURL: srv.URL + "/v1", APIKey: "sk-test"})
			st, err := p.Stream(context.Background(), &engine.ModelRequest{Model: "m", Messages: []engine.ModelMessage{userMsg("Hi there")}})
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
		{"rate_limited", engine.UpstreamError{Status: 429, Retryable: true, RetryAfter: 7 * time.Second,
			Message: "requests: Rate limit reached for requests"}},
		{"rate_limited_ms", engine.UpstreamError{Status: 429, Retryable: true, RetryAfter: 1500 * time.Millisecond,
			Message: "requests: Rate limit reached for requests"}},
		{"server_error", engine.UpstreamError{Status: 500, Retryable: true,
			Message: "upstream connect error or disconnect/reset before headers"}},
		{"bad_request", engine.UpstreamError{Status: 400,
			Message: "invalid_request_error: Invalid value for 'temperature': expected a number between 0 and 2."}},
		{"not_found_no_retry", engine.UpstreamError{Status: 503,
			Message: "invalid_request_error: The model `mock-error` does not exist."}},
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
		name string
		cfg  Config
		req  engine.ModelRequest
	}{
		{"every_field", Config{Headers: map[string]string{"X-Team": "a", "X-Override": "config"}, MaxTokensField: "max_completion_tokens"},
			engine.ModelRequest{
				Model: "gpt-test", System: "Be brief.", Messages: []engine.ModelMessage{userMsg("Weather in Paris?")},
				Tools:           []engine.ToolInfo{weatherTool, {Name: "now", Kind: engine.ToolKindBuiltin}},
				ToolChoice:      &engine.ToolChoice{Type: engine.ToolChoiceTool, ToolName: "get_weather"},
				MaxOutputTokens: ptr(256), Temperature: ptr(0.2), TopP: ptr(0.9), TopK: ptr(40),
				PresencePenalty: ptr(0.1), FrequencyPenalty: ptr(0.3), StopSequences: []string{"END"}, Seed: ptr(int64(7)),
				Headers:         map[string]string{"X-Override": "request"},
				ProviderOptions: map[string]any{"openai": map[string]any{"reasoning_effort": "low", "user": "u1"}, "anthropic": map[string]any{"ignored": true}},
				Output:          &engine.OutputSpec{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
			}},
		{"tool_round_trip", Config{}, engine.ModelRequest{
			Model: "mock-model", Tools: []engine.ToolInfo{weatherTool},
			ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceAuto},
			Messages: []engine.ModelMessage{
				userMsg("Weather in Paris and Tokyo?"),
				{Role: engine.RoleAssistant, Content: []engine.ContentPart{
					{Type: engine.ContentReasoning, Text: "two cities"},
					{Type: engine.ContentText, Text: "Checking."},
					{Type: engine.ContentToolCall, ToolCallID: "call_0002", ToolName: "get_weather", Input: json.RawMessage(`{"city":"Paris"}`)},
					{Type: engine.ContentToolCall, ToolCallID: "call_0003", ToolName: "get_weather", Input: json.RawMessage(`{"city":"Tokyo"}`)},
				}},
				{Role: engine.RoleTool, Content: []engine.ContentPart{
					{Type: engine.ContentToolResult, ToolCallID: "call_0002", ToolName: "get_weather", Output: json.RawMessage(`{"city":"Paris","weather":"sunny","tempC":21}`)},
					{Type: engine.ContentToolResult, ToolCallID: "call_0003", ToolName: "get_weather", Output: json.RawMessage(`"tool failed: timeout"`), IsError: true},
				}},
			}}},
		{"files", Config{}, engine.ModelRequest{Model: "gpt-test", Messages: []engine.ModelMessage{
			{Role: engine.RoleUser, Content: []engine.ContentPart{
				{Type: engine.ContentText, Text: "What is in these?"},
				{Type: engine.ContentFile, MediaType: "image/png", URL: "data:image/png;base64,iVBORw0KGgo=", Filename: "dot.png"},
				{Type: engine.ContentFile, MediaType: "image/jpeg", URL: "https://example.com/cat.jpg"},
				{Type: engine.ContentFile, MediaType: "application/pdf", URL: "data:application/pdf;base64,JVBERi0xLjQK", Filename: "report.pdf"},
				{Type: engine.ContentFile, MediaType: "application/pdf", URL: "data:application/pdf,%25PDF-1.4%0A"},
				{Type: engine.ContentFile, MediaType: "audio/wav", URL: "data:audio/wav;base64,UklGRg=="},
				// RFC 2397 schemes are case-insensitive: the API gets "data:…;base64,".
				{Type: engine.ContentFile, MediaType: "image/png", URL: "DATA:image/png;BASE64,iVBORw0KGgo="},
				{Type: engine.ContentFile, MediaType: "Image/GIF", URL: "Data:image/gif,GIF89a"},
				{Type: engine.ContentFile, MediaType: "application/pdf", URL: "dAtA:application/pdf;Base64,JVBERi0xLjQK"},
			}},
			userMsg("text only stays a string"),
		}}},
		{"json_object_output", Config{APIKey: "sk-x"}, engine.ModelRequest{Model: "m", Messages: []engine.ModelMessage{userMsg("x")},
			Output: &engine.OutputSpec{}, ToolChoice: &engine.ToolChoice{Type: engine.ToolChoiceNone}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay.NewServer(t, "testdata/responses/text.http")
			tt.cfg.BaseURL = srv.URL + "/v1/"
			st, err := New(tt.cfg).Stream(context.Background(), &tt.req)
			if err != nil {
				t.Fatal(err)
			}
			out := replay.Render(st)
			got := srv.Received()
			if len(got) != 1 {
				t.Fatalf("server got %d requests", len(got))
			}
			r := got[0]
			if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
				t.Errorf("request = %s %s", r.Method, r.Path)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content-type = %q", ct)
			}
			wantAuth := ""
			if tt.cfg.APIKey != "" {
				wantAuth = "Bearer " + tt.cfg.APIKey
			}
			if a := r.Header.Get("Authorization"); a != wantAuth {
				t.Errorf("authorization = %q, want %q", a, wantAuth)
			}
			for k, v := range tt.cfg.Headers {
				if want := v; tt.req.Headers[k] != "" {
					want = tt.req.Headers[k]
					v = want
				}
				if got := r.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			golden.CheckJSON(t, filepath.Join("testdata", "requests", tt.name+".json"), r.Body)
			if tt.req.TopK != nil && !strings.Contains(out, "topK is not part of") {
				t.Errorf("no topK warning in the finish part:\n%s", out)
			}
		})
	}
}

// TestUnsupportedFiles: a file the API does not take fails the request
// before anything is sent, naming the media type; CheckFile agrees.
func TestUnsupportedFiles(t *testing.T) {
	p := New(Config{BaseURL: "http://127.0.0.1:1"})
	for _, tc := range []struct {
		mediaType, url, want string
	}{
		{"application/zip", "data:application/zip;base64,UEs=", `does not accept "application/zip"`},
		{"text/plain", "data:text/plain,hi", `does not accept "text/plain"`},
		{"application/pdf", "https://example.com/a.pdf", "must be sent inline"},
		{"audio/mpeg", "https://example.com/a.mp3", "must be sent inline"},
	} {
		_, err := p.Stream(context.Background(), &engine.ModelRequest{Model: "m", Messages: []engine.ModelMessage{
			{Role: engine.RoleUser, Content: []engine.ContentPart{{Type: engine.ContentFile, MediaType: tc.mediaType, URL: tc.url}}}}})
		var ue *engine.UpstreamError
		if !errors.As(err, &ue) || ue.Retryable || !strings.Contains(ue.Message, tc.want) {
			t.Errorf("%s %s: error %v, want a non-retryable error containing %q", tc.mediaType, tc.url, err, tc.want)
		}
		if err := p.CheckFile(tc.mediaType, !strings.HasPrefix(tc.url, "data:")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckFile(%s) = %v, want %q", tc.mediaType, err, tc.want)
		}
	}
}

// start opens a stream of a one-message request against baseURL.
func start(ctx context.Context, baseURL string) (engine.Stream, error) {
	return New(Config{BaseURL: baseURL}).Stream(ctx, &engine.ModelRequest{Model: "m"})
}

// TestCancelStopsStream cancels while the server holds the stream open.
func TestCancelStopsStream(t *testing.T) {
	first := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}` + "\n\n"
	// The first event makes two parts: text-start, text-delta.
	replay.CheckCancel(t, first, 2, start)
}

// TestHeaderTimeout: a server that never answers is a retryable failure.
func TestHeaderTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // the server notices the client leaving only after the body
		<-r.Context().Done()
	}))
	defer srv.Close()
	_, err := New(Config{BaseURL: srv.URL, Timeout: time.Millisecond}).Stream(context.Background(), &engine.ModelRequest{Model: "m"})
	var ue *engine.UpstreamError
	if !errors.As(err, &ue) || !ue.Retryable || ue.Status != 0 || !strings.Contains(ue.Message, "no response headers") {
		t.Errorf("error = %v, want a retryable header timeout", err)
	}
}

func TestTransportErrorIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := New(Config{BaseURL: url}).Stream(context.Background(), &engine.ModelRequest{Model: "m"})
	var ue *engine.UpstreamError
	if !errors.As(err, &ue) || !ue.Retryable || ue.Status != 0 {
		t.Errorf("error = %v, want a retryable transport error", err)
	}
}

// FuzzStreamParser feeds arbitrary bodies through the chunk handler: it
// must end (finish part or error) without panicking.
func FuzzStreamParser(f *testing.F) {
	replay.SeedBodies(f, "testdata/responses/*.http")
	f.Fuzz(func(t *testing.T, body []byte) {
		replay.CheckEnding(t, wire.NewStream(context.Background(), io.NopCloser(bytes.NewReader(body)), &handler{name: "openai"}))
	})
}

func BenchmarkStreamParallelTools(b *testing.B) {
	body := replay.Body(b, "testdata/responses/parallel_tools.http")
	for b.Loop() {
		st := wire.NewStream(context.Background(), io.NopCloser(bytes.NewReader(body)), &handler{name: "openai"})
		for st.Next() {
		}
		if st.Err() != nil {
			b.Fatal(st.Err())
		}
	}
}
