package gateway

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	goldenfile "github.com/turngate/turngate/internal/golden"
)

// Files the tests send: a 1x1 PNG, a one-line PDF, and their data: URLs.
var (
	pngBytes, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg==")
	pngURL      = "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes)
	pdfURL      = "data:application/pdf;base64," + base64.StdEncoding.EncodeToString([]byte("%PDF-1.4\n%%EOF\n"))
)

// fakeUpstream is a model API at the edge of the world: it records the raw
// body of every request and answers each with one canned stream.
type fakeUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newFakeUpstream(t *testing.T, stream string) *fakeUpstream {
	f := &fakeUpstream{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, data)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	}))
	t.Cleanup(f.Close)
	return f
}

// requests returns the bodies received so far.
func (f *fakeUpstream) requests() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...)
}

const (
	openAIStream = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"A red dot."},"finish_reason":null}]}

data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`
	anthropicStream = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"A red dot."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":4}}

event: message_stop
data: {"type":"message_stop"}

`
)

// withProviders adds the agents "oai" and "claude" on fake OpenAI and
// Anthropic upstreams.
func withProviders(oai, claude *fakeUpstream) func(*config.Config) {
	return func(c *config.Config) {
		c.Providers = append(c.Providers,
			config.Provider{Name: "oai", Type: config.ProviderOpenAI, BaseURL: oai.URL + "/v1"},
			config.Provider{Name: "claude", Type: config.ProviderAnthropic, BaseURL: claude.URL})
		c.Models["oai"] = config.Model{Provider: "oai", Model: "gpt-test"}
		c.Models["claude"] = config.Model{Provider: "claude", Model: "claude-test"}
		c.Agents = append(c.Agents, config.Agent{Name: "oai", Model: "oai"}, config.Agent{Name: "claude", Model: "claude"})
	}
}

func filePart(mediaType, url, filename string) map[string]any {
	p := map[string]any{"type": "file", "mediaType": mediaType, "url": url}
	if filename != "" {
		p["filename"] = filename
	}
	return p
}

// userWith is a user message of text and parts.
func userWith(id, text string, parts ...map[string]any) map[string]any {
	all := []any{map[string]any{"type": "text", "text": text}}
	for _, p := range parts {
		all = append(all, p)
	}
	return map[string]any{"id": id, "role": "user", "parts": all}
}

// TestFilesReachProviders sends an image, a remote image and a PDF to an
// OpenAI and an Anthropic agent, through the chat stream and saveMessages,
// and compares the bodies the upstreams receive with golden files.
func TestFilesReachProviders(t *testing.T) {
	oai, claude := newFakeUpstream(t, openAIStream), newFakeUpstream(t, anthropicStream)
	g := newTestGateway(t, "basic", withProviders(oai, claude))
	msg := userWith("u1", "What is in these?", filePart("image/png", pngURL, "dot.png"),
		filePart("image/jpeg", "https://example.com/cat.jpg", ""))
	pdf := userWith("u2", "Summarise it.", filePart("application/pdf", pdfURL, "report.pdf"))
	for _, tc := range []struct {
		agent string
		up    *fakeUpstream
	}{{"oai", oai}, {"claude", claude}} {
		t.Run(tc.agent, func(t *testing.T) {
			resp := g.do("POST", "/v1/agents/"+tc.agent+"/chat", map[string]any{"id": "s-" + tc.agent, "messages": []any{msg}})
			frames := decodeSSE[map[string]any](t, resp.Body)
			resp.Body.Close()
			if last := frames[len(frames)-1]; last["type"] != "finish" || last["finishReason"] != "stop" {
				t.Fatalf("chat stream ended with %v", last)
			}
			var r turnResponse
			g.doJSON("POST", "/v1/agents/"+tc.agent+"/sessions/s-"+tc.agent+"/messages", map[string]any{"messages": []any{pdf}}, http.StatusOK, &r)
			if r.Status != engine.StatusCompleted {
				t.Fatalf("saveMessages: %+v", r)
			}
			bodies := tc.up.requests()
			if len(bodies) != 2 {
				t.Fatalf("upstream got %d requests, want 2", len(bodies))
			}
			goldenfile.CheckJSON(t, filepath.Join("testdata", "files", tc.agent+"_image.json"), bodies[0])
			goldenfile.CheckJSON(t, filepath.Join("testdata", "files", tc.agent+"_pdf.json"), bodies[1])
		})
	}
}

// TestFilesInHistory: file parts come back from the history endpoint
// exactly as sent (saveMessages and an async submission alike).
func TestFilesInHistory(t *testing.T) {
	g := newTestGateway(t, "basic")
	meta := json.RawMessage(`{"app":{"origin":"camera"}}`)
	part := filePart("image/png", pngURL, "dot.png")
	part["providerMetadata"] = meta
	remote := filePart("application/pdf", "https://example.com/a.pdf", "")
	g.doJSON("POST", "/v1/agents/demo/sessions/h1/messages", map[string]any{"messages": []any{userWith("u1", "hi", part, remote)}}, http.StatusOK, nil)
	want := []engine.UIPart{{Type: "text", Text: "hi"},
		{Type: "file", MediaType: "image/png", URL: pngURL, Filename: "dot.png", ProviderMetadata: meta},
		{Type: "file", MediaType: "application/pdf", URL: "https://example.com/a.pdf"}}
	h := g.history("demo", "h1")
	if len(h) != 2 || !samePartsJSON(h[0].Parts, want) {
		t.Fatalf("history = %+v", h)
	}
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/h2/messages", map[string]any{"async": true, "messages": []any{userWith("u2", "hi", part, remote)}}, http.StatusAccepted, &sub)
	waitSubmission(t, g, "demo", "h2", sub.SubmissionID)
	if h := g.history("demo", "h2"); len(h) != 2 || !samePartsJSON(h[0].Parts, want) {
		t.Fatalf("submission history = %+v", h)
	}
}

func samePartsJSON(a, b []engine.UIPart) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestFileLimits: every refused file is a 4xx naming the part, before any
// model call; the message is not stored.
func TestFileLimits(t *testing.T) {
	oai, claude := newFakeUpstream(t, openAIStream), newFakeUpstream(t, anthropicStream)
	g := newTestGateway(t, "basic", withProviders(oai, claude), func(c *config.Config) {
		c.Limits.Attachments.MaxBytes = 100
		c.Limits.Attachments.MaxCount = 2
		c.Agents = append(c.Agents, config.Agent{Name: "images", Model: "demo",
			Attachments: &config.Attachments{AllowedMediaTypes: []string{"image/*"}}})
	})
	big := "data:image/png;base64," + base64.StdEncoding.EncodeToString(make([]byte, 101))
	for _, tc := range []struct {
		name    string
		agent   string
		parts   []map[string]any
		status  int
		code    string
		pointer string
		message string
	}{
		{"too large", "demo", []map[string]any{filePart("image/png", big, "")}, 413, CodeTooLarge, "/messages/0/parts/1", "101 bytes, more than the limit of 100"},
		{"too many", "demo", []map[string]any{filePart("image/png", pngURL, ""), filePart("image/png", pngURL, ""), filePart("image/png", pngURL, "")},
			400, CodeInvalidAttachment, "/messages/0/parts", "3 files is more than the limit of 2"},
		{"type not allowed", "images", []map[string]any{filePart("application/pdf", pdfURL, "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", `type "application/pdf" are not allowed (allowed: image/*)`},
		{"malformed data URL", "demo", []map[string]any{filePart("image/png", "data:image/png;base64,!!!!", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", "malformed url"},
		{"no comma", "demo", []map[string]any{filePart("image/png", "data:image/png;base64", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", "no comma"},
		{"type mismatch", "demo", []map[string]any{filePart("image/png", pdfURL, "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", `does not match the data: URL's "application/pdf"`},
		{"no media type", "demo", []map[string]any{filePart("", pngURL, "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", "needs a mediaType"},
		{"bad media type", "demo", []map[string]any{filePart("image png", pngURL, "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", "is not a media type"},
		{"http URL", "demo", []map[string]any{filePart("image/png", "http://example.com/a.png", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", `not a "http" URL`},
		{"file URL", "demo", []map[string]any{filePart("image/png", "file:///etc/passwd", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", `not a "file" URL`},
		{"credentials", "demo", []map[string]any{filePart("image/png", "https://u:p@example.com/a.png", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", "credentials"},
		{"no url", "demo", []map[string]any{filePart("image/png", "", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", "needs a url"},
		{"control in filename", "demo", []map[string]any{filePart("image/png", pngURL, "a\nb.png")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", "control characters"},
		{"unsupported by OpenAI", "oai", []map[string]any{filePart("application/zip", "data:application/zip;base64,UEs=", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", `Chat Completions API does not accept "application/zip"`},
		{"remote PDF to OpenAI", "oai", []map[string]any{filePart("application/pdf", "https://example.com/a.pdf", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", "must be sent inline"},
		{"unsupported by Anthropic", "claude", []map[string]any{filePart("audio/wav", "data:audio/wav;base64,UklGRg==", "")}, 400, CodeInvalidAttachment, "/messages/0/parts/1", `Anthropic Messages API does not accept "audio/wav"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msgs := []any{userWith("u1", "look", tc.parts...)}
			for path, body := range map[string]any{
				"/v1/agents/" + tc.agent + "/chat":                  map[string]any{"id": "lim", "messages": msgs},
				"/v1/agents/" + tc.agent + "/sessions/lim/messages": map[string]any{"messages": msgs},
			} {
				resp := g.do("POST", path, body)
				var body struct{ Code, Message, Pointer string }
				_ = json.NewDecoder(resp.Body).Decode(&body)
				resp.Body.Close()
				if resp.StatusCode != tc.status || body.Code != tc.code || body.Pointer != tc.pointer || !strings.Contains(body.Message, tc.message) {
					t.Errorf("%s: %d %+v, want %d %s at %s with %q", path, resp.StatusCode, body, tc.status, tc.code, tc.pointer, tc.message)
				}
			}
		})
	}
	if n := len(oai.requests()) + len(claude.requests()); n != 0 {
		t.Errorf("the upstreams got %d requests", n)
	}
	resp := g.do("GET", "/v1/agents/demo/sessions/lim/messages", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the session of refused messages exists: status %d", resp.StatusCode)
	}
}

// TestRuleRefusesAttachment: a beforeTurn rule refusing a PDF ends the
// turn before the model: the UI stream carries the reason in an error
// chunk, saveMessages answers 403 turn_refused, the user message is stored
// and the audit log names the rule. A Rego rule reading input.attachments
// blocks a tool call on a turn with a remote file.
func TestRuleRefusesAttachment(t *testing.T) {
	oai, claude := newFakeUpstream(t, openAIStream), newFakeUpstream(t, anthropicStream)
	g := newTestGateway(t, "files", withProviders(oai, claude))
	pdf := userWith("u1", "Summarise it.", filePart("application/pdf", pdfURL, "report.pdf"))
	chunks := readUIStream(t, g.do("POST", "/v1/agents/oai/chat", map[string]any{"id": "r1", "messages": []any{pdf}}))
	var errText string
	for _, c := range chunks {
		if c.str("type") == "error" {
			errText = c.str("errorText")
		}
	}
	if errText != "PDF files are not accepted here." || chunks[len(chunks)-1].str("type") != "finish" {
		t.Errorf("chat stream: %v", chunks)
	}
	resp := g.do("POST", "/v1/agents/claude/sessions/r2/messages", map[string]any{"messages": []any{pdf}})
	var body struct{ Code, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || body.Code != CodeTurnRefused || body.Message != "PDF files are not accepted here." {
		t.Errorf("saveMessages: %d %+v", resp.StatusCode, body)
	}
	if n := len(oai.requests()) + len(claude.requests()); n != 0 {
		t.Errorf("a refused turn reached the model: %d requests", n)
	}
	for _, s := range []struct{ agent, id string }{{"oai", "r1"}, {"claude", "r2"}} {
		if h := g.history(s.agent, s.id); len(h) != 1 || h[0].Parts[1].MediaType != "application/pdf" {
			t.Errorf("%s history: %+v", s.id, h)
		}
	}
	if !strings.Contains(g.auditLog(), `"attachments.yaml#no-pdf"`) {
		t.Errorf("the audit log does not name the rule:\n%s", g.auditLog())
	}
	// An image passes the CEL rule and reaches the model.
	img := userWith("u2", "And this?", filePart("image/png", pngURL, "dot.png"))
	g.doJSON("POST", "/v1/agents/oai/sessions/r1/messages", map[string]any{"messages": []any{img}}, http.StatusOK, nil)
	if n := len(oai.requests()); n != 1 {
		t.Errorf("the image turn made %d model requests, want 1", n)
	}

	// The scripted demo model calls weather; the Rego rule blocks it on a
	// turn that brought a remote file.
	var r turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/r3/messages", map[string]any{"messages": []any{
		userWith("u3", "weather in Paris", filePart("image/jpeg", "https://example.com/paris.jpg", ""))}}, http.StatusOK, &r)
	if s := mustJSON(r.Message); !strings.Contains(s, "tools do not run on turns with remote files") {
		t.Errorf("weather was not blocked: %s", s)
	}
}

// TestRefusedOnOpenAIEndpoint: a refused turn on /v1/chat/completions is a
// 403 turn_refused in OpenAI's error body, streaming or not, without a
// model call.
func TestRefusedOnOpenAIEndpoint(t *testing.T) {
	oai, claude := newFakeUpstream(t, openAIStream), newFakeUpstream(t, anthropicStream)
	g := newTestGateway(t, "files", withProviders(oai, claude))
	for _, stream := range []bool{false, true} {
		resp := g.do("POST", "/v1/chat/completions", map[string]any{"model": "oai", "stream": stream,
			"messages": []any{map[string]any{"role": "user", "content": "tell me the forbidden thing"}}})
		var body struct {
			Error struct{ Code, Message string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || body.Error.Code != CodeTurnRefused || body.Error.Message != "That topic is not allowed." {
			t.Errorf("stream %v: %d %+v", stream, resp.StatusCode, body)
		}
	}
	if n := len(oai.requests()); n != 0 {
		t.Errorf("a refused turn reached the model: %d requests", n)
	}
}
