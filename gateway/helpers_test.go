package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/metrics"
	"github.com/turngate/turngate/gateway/store"
	goldenfile "github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/internal/syncbuf"
	"github.com/turngate/turngate/policy/ruleset"
)

// testGateway is a real gateway on httptest: the real engine, the
// scripted model, a SQLite file and a rules directory from testdata.
type testGateway struct {
	t     testing.TB
	cfg   *config.Config
	srv   *Server
	http  *httptest.Server
	store store.Store
	// audit collects the audit log (unless Options.Audit was given).
	audit *syncbuf.Buffer
	// key is the bearer key sent by do (empty: none).
	key string
}

// testConfig is testdata/config.yaml with the test's own store and the
// rules directory testdata/rules/<rules>.
func testConfig(t testing.TB, rules string) *config.Config {
	t.Helper()
	cfg, err := config.Load(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Path = filepath.Join(t.TempDir(), "turngate.db")
	cfg.Rules.Dir = filepath.Join("testdata", "rules", rules)
	return cfg
}

// startGateway starts a gateway for cfg; opts may set an Observer, a
// Logger (else it logs nothing), and a Store (else it opens cfg's; the
// gateway closes it either way).
func startGateway(t testing.TB, cfg *config.Config, opts Options) *testGateway {
	t.Helper()
	st := opts.Store
	if st == nil {
		st = openTestStore(t, cfg)
	}
	rules, err := ruleset.NewManager(cfg.Rules.Dir, ruleset.Options{}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	models, err := NewResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &testGateway{t: t, cfg: cfg, store: st, audit: &syncbuf.Buffer{}}
	opts.Config, opts.Store, opts.Rules = cfg, st, rules
	if opts.Audit == nil {
		opts.Audit = audit.New(g.audit, nil, discardLogger())
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	// Wired as turngate serve wires it: upstream calls are timed and counted.
	opts.Engine = engine.New(engine.Options{Models: opts.Metrics.Resolver(models), Logger: discardLogger(), RetryBaseDelay: time.Millisecond})
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.srv = srv
	g.http = httptest.NewServer(srv.Handler())
	t.Cleanup(g.close)
	return g
}

func newTestGateway(t *testing.T, rules string, mods ...func(*config.Config)) *testGateway {
	t.Helper()
	cfg := testConfig(t, rules)
	for _, m := range mods {
		m(cfg)
	}
	return startGateway(t, cfg, Options{})
}

// auditLog is the audit log so far, with every record handed over before
// the call (the decision records are written behind the answers).
func (g *testGateway) auditLog() string {
	if g.srv != nil {
		g.srv.audit.Flush()
	}
	return g.audit.String()
}

// close shuts the gateway down (idempotent).
func (g *testGateway) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.shutdown(ctx); err != nil {
		g.t.Errorf("shutdown: %v", err)
	}
}

// shutdown shuts the gateway down with ctx (idempotent).
func (g *testGateway) shutdown(ctx context.Context) error {
	if g.srv == nil {
		return nil
	}
	err := g.srv.Shutdown(ctx)
	g.http.Close()
	g.store.Close()
	g.srv = nil
	return err
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// do sends a request with body (a string or a value to encode as JSON).
func (g *testGateway) do(method, path string, body any, headers ...string) *http.Response {
	g.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			g.t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, g.http.URL+path, r)
	if err != nil {
		g.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if g.key != "" {
		req.Header.Set("Authorization", "Bearer "+g.key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp
}

// doJSON sends a request and decodes the JSON response, checking status.
func (g *testGateway) doJSON(method, path string, body any, wantStatus int, out any, headers ...string) {
	g.t.Helper()
	resp := g.do(method, path, body, headers...)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		g.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, wantStatus, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			g.t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
}

// sseEvents reads an SSE body: the data payloads, and whether [DONE] came.
func sseEvents(t *testing.T, r io.Reader) (payloads []string, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Errorf("event after [DONE]: %s", data)
		}
		payloads = append(payloads, data)
	}
	return payloads, done
}

// decodeSSE reads an SSE body that must end with [DONE] and decodes each
// data payload as a T.
func decodeSSE[T any](t *testing.T, r io.Reader) []T {
	t.Helper()
	payloads, done := sseEvents(t, r)
	if !done {
		t.Error("stream did not end with data: [DONE]")
	}
	var out []T
	for _, p := range payloads {
		var v T
		if err := json.Unmarshal([]byte(p), &v); err != nil {
			t.Fatalf("chunk %s: %v", p, err)
		}
		out = append(out, v)
	}
	return out
}

// chunk is a UI message stream chunk, decoded loosely.
type chunk map[string]any

func (c chunk) str(k string) string { s, _ := c[k].(string); return s }

// readUIStream reads a UI message stream response and checks it against
// the protocol rules (protocols.md A.3-A.13).
func readUIStream(t *testing.T, resp *http.Response) []chunk {
	chunks, _ := readUIStreamRaw(t, resp)
	return chunks
}

// readUIStreamRaw is readUIStream that also returns the raw body.
func readUIStreamRaw(t *testing.T, resp *http.Response) ([]chunk, []byte) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	for k, v := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-cache, no-store", "Connection": "keep-alive",
		"X-Vercel-Ai-Ui-Message-Stream": "v1", "X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading stream: %v", err)
	}
	chunks := decodeSSE[chunk](t, bytes.NewReader(raw))
	checkUIStream(t, chunks)
	return chunks, raw
}

// validFinish are the finishReason values the AI SDK accepts.
var validFinish = map[string]bool{"stop": true, "length": true, "content-filter": true, "tool-calls": true,
	"error": true, "interrupted": true, "other": true}

// knownChunks are the chunk types the AI SDK's schema accepts (A.5).
var knownChunks = map[string]bool{"start": true, "start-step": true, "finish-step": true, "text-start": true,
	"text-delta": true, "text-end": true, "reasoning-start": true, "reasoning-delta": true, "reasoning-end": true,
	"tool-input-start": true, "tool-input-delta": true, "tool-input-available": true, "tool-input-error": true,
	"tool-output-available": true, "tool-output-error": true, "tool-output-denied": true, "finish": true,
	"tool-approval-request": true, "tool-approval-response": true,
	"error": true, "abort": true, "message-metadata": true}

// checkUIStream checks the protocol rules a useChat client relies on.
func checkUIStream(t *testing.T, chunks []chunk) {
	t.Helper()
	if len(chunks) == 0 {
		t.Fatal("empty stream")
	}
	if chunks[0].str("type") != "start" {
		t.Errorf("first chunk is %v, want start", chunks[0])
	}
	openText := map[string]bool{}
	openReasoning := map[string]bool{}
	calls := map[string]bool{}
	inStep, steps := false, 0
	finished, aborted := false, false
	for i, c := range chunks {
		typ := c.str("type")
		if !knownChunks[typ] && !strings.HasPrefix(typ, "data-") {
			t.Errorf("chunk %d: unknown type %q", i, typ)
		}
		if finished || aborted {
			t.Errorf("chunk %d (%s) after the end", i, typ)
		}
		switch typ {
		case "start":
			if i != 0 {
				t.Errorf("chunk %d: start not first", i)
			}
		case "start-step":
			steps++
			if inStep {
				t.Errorf("chunk %d: start-step inside a step", i)
			}
			inStep = true
		case "finish-step":
			if !inStep {
				t.Errorf("chunk %d: finish-step outside a step", i)
			}
			inStep = false
		case "text-start":
			openText[c.str("id")] = true
		case "text-delta":
			if !openText[c.str("id")] {
				t.Errorf("chunk %d: text-delta for unopened id %q", i, c.str("id"))
			}
		case "text-end":
			if !openText[c.str("id")] {
				t.Errorf("chunk %d: text-end for unopened id %q", i, c.str("id"))
			}
			delete(openText, c.str("id"))
		case "reasoning-start":
			openReasoning[c.str("id")] = true
		case "reasoning-delta", "reasoning-end":
			if !openReasoning[c.str("id")] {
				t.Errorf("chunk %d: %s for unopened id %q", i, typ, c.str("id"))
			}
		case "tool-input-start", "tool-input-available", "tool-input-error":
			calls[c.str("toolCallId")] = true
		case "tool-input-delta":
			if !calls[c.str("toolCallId")] {
				t.Errorf("chunk %d: tool-input-delta before tool-input-start", i)
			}
		case "tool-output-available", "tool-output-error", "tool-output-denied":
			// A continuation settles calls of the continued message
			// before its first step (protocols.md A.9).
			if !calls[c.str("toolCallId")] && steps > 0 {
				t.Errorf("chunk %d: %s for unknown call %q", i, typ, c.str("toolCallId"))
			}
		case "finish":
			if r, ok := c["finishReason"]; ok && !validFinish[r.(string)] {
				t.Errorf("chunk %d: invalid finishReason %v", i, r)
			}
			finished = true
		case "abort":
			// An aborted turn ends with abort, as the ai server's does.
			aborted = true
		}
	}
	if !finished && !aborted {
		t.Error("stream ends with neither finish nor abort")
	}
	if len(openText) > 0 && !aborted && chunks[len(chunks)-1].str("finishReason") != "error" {
		t.Errorf("text parts left open: %v", openText)
	}
}

// types lists the chunk types in order.
func types(chunks []chunk) []string {
	out := make([]string, len(chunks))
	for i, c := range chunks {
		out[i] = c.str("type")
	}
	return out
}

// golden compares got with testdata/golden/name, rewriting it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", "golden", name), string(got))
}

// chatBody is a DefaultChatTransport body with one new user message.
func chatBody(session, msgID, text string, extra ...any) map[string]any {
	b := map[string]any{
		"id":       session,
		"messages": []any{map[string]any{"id": msgID, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}},
		"trigger":  "submit-message",
	}
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

// history returns a session's stored transcript.
func (g *testGateway) history(agent, session string) []engine.UIMessage {
	g.t.Helper()
	var out struct {
		Messages []engine.UIMessage `json:"messages"`
	}
	g.doJSON("GET", "/v1/agents/"+agent+"/sessions/"+session+"/messages", nil, http.StatusOK, &out)
	return out.Messages
}
