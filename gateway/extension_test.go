package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/extension"
	goldenfile "github.com/turngate/turngate/internal/golden"
)

// extSecret signs the test extensions' deliveries.
const extSecret = "test-extension-secret"

// received is one delivery an extension received.
type received struct {
	ID        uint64                    `json:"id"`
	Hook      string                    `json:"hook"`
	RequestID string                    `json:"requestId"`
	Agent     string                    `json:"agent"`
	Deadline  time.Time                 `json:"deadline"`
	Aborted   bool                      `json:"aborted"`
	Snapshot  json.RawMessage           `json:"snapshot"`
	Snapshots []extension.ChunkSnapshot `json:"snapshots"`
}

// fakeExtension is an http extension at the edge of the world: it
// verifies each delivery's signature with its secret (answering 401 when
// it does not match), records it, and answers with answer.
type fakeExtension struct {
	*httptest.Server
	secret string
	// answer returns the answer to a verified delivery; nil answers 204.
	answer func(r *received) (status int, body string)

	mu        sync.Mutex
	got       []received
	forged    int // deliveries whose signature did not verify
	verifyErr error
}

func newFakeExtension(t *testing.T, secret string, answer func(r *received) (int, string)) *fakeExtension {
	f := &fakeExtension{secret: secret, answer: answer}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		if err := extension.Verify([]byte(f.secret), r.Header.Get(extension.SignatureHeader), data, time.Now(), extension.DefaultTolerance); err != nil {
			f.mu.Lock()
			f.forged++
			f.verifyErr = err
			f.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var rec received
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Errorf("delivery %s: %v", data, err)
		}
		f.mu.Lock()
		f.got = append(f.got, rec)
		f.mu.Unlock()
		status, body := http.StatusNoContent, ""
		if f.answer != nil {
			status, body = f.answer(&rec)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

// deliveries returns the deliveries received so far of hook ("" for all).
func (f *fakeExtension) deliveries(hook string) []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []received
	for _, r := range f.got {
		if hook == "" || r.Hook == hook {
			out = append(out, r)
		}
	}
	return out
}

// withExtension adds an http extension named name at url to a config.
func withExtension(name, url, secret string, timeout time.Duration, queue int, hooks ...string) func(*config.Config) {
	return func(c *config.Config) {
		c.Extensions = append(c.Extensions, config.Extension{Name: name, Transport: config.TransportHTTP, URL: url,
			Secret: secret, Hooks: hooks, Timeout: timeout, QueueSize: queue})
	}
}

// TestExtensionSnapshots runs a two-step tool turn with an extension
// subscribed to every hook and checks each hook's snapshots against
// golden JSON: the reference's fields, in its order.
func TestExtensionSnapshots(t *testing.T) {
	ext := newFakeExtension(t, extSecret, nil)
	g := newTestGateway(t, "basic", withExtension("all", ext.URL, extSecret, 5*time.Second, 1024, config.ExtensionHooks...))
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "weather in Paris", "tenantHint", "blue")))
	waitFor(t, "the second onStepFinish", func() bool { return len(ext.deliveries(extension.HookOnStepFinish)) == 2 })

	all := ext.deliveries("")
	for i, r := range all {
		if r.ID != uint64(i+1) {
			t.Errorf("delivery %d has id %d: deliveries are numbered in order from 1", i, r.ID)
		}
		if r.Agent != "demo" || r.RequestID == "" {
			t.Errorf("delivery %d: agent %q, requestId %q", i, r.Agent, r.RequestID)
		}
	}
	if ext.forged != 0 {
		t.Errorf("%d deliveries did not verify: %v", ext.forged, ext.verifyErr)
	}
	for _, hook := range config.ExtensionHooks {
		var snaps []any
		for _, r := range ext.deliveries(hook) {
			if hook == extension.HookOnChunk {
				for _, c := range r.Snapshots {
					snaps = append(snaps, c)
				}
				continue
			}
			var v map[string]any
			if err := json.Unmarshal(r.Snapshot, &v); err != nil {
				t.Fatal(err)
			}
			if _, ok := v["durationMs"]; ok {
				v["durationMs"] = "(duration)"
			}
			snaps = append(snaps, v)
		}
		// Keys of a map marshal sorted; the raw order of the first
		// snapshot is checked below.
		data, err := json.Marshal(snaps)
		if err != nil {
			t.Fatal(err)
		}
		goldenfile.CheckJSON(t, filepath.Join("testdata", "golden", "extension_"+hook+".json"), data)
	}
	order := map[string]string{
		extension.HookBeforeTurn:     `{"system":`,
		extension.HookBeforeToolCall: `{"toolName":"weather","toolCallId":`,
		extension.HookAfterToolCall:  `{"toolName":"weather","toolCallId":`,
		extension.HookOnStepFinish:   `{"stepNumber":0,"finishReason":"tool-calls","text":`,
	}
	for hook, prefix := range order {
		if s := string(ext.deliveries(hook)[0].Snapshot); !strings.HasPrefix(s, prefix) {
			t.Errorf("%s snapshot %s does not start %s (the reference's field order)", hook, s, prefix)
		}
	}
}

// beforeTurnAnswer answers a beforeTurn delivery with a result that tries
// everything: a system line, a higher step cap, an extra tool, sampling,
// headers, and fields extensions may not set.
func beforeTurnAnswer(r *received) (int, string) {
	if r.Hook != extension.HookBeforeTurn {
		return http.StatusNoContent, ""
	}
	var snap extension.BeforeTurnSnapshot
	_ = json.Unmarshal(r.Snapshot, &snap)
	result := map[string]any{
		"system":      snap.System + "\nExtension line.",
		"maxSteps":    50,
		"activeTools": []string{"weather", "search", "delete"},
		"temperature": 0.5,
		"headers":     map[string]string{"X-Ext": "yes"},
		"model":       "slow",
		"stopWhen":    []any{map[string]any{"type": "stepCount", "count": 1}},
	}
	data, _ := json.Marshal(map[string]any{"result": result})
	return http.StatusOK, string(data)
}

// TestExtensionBeforeTurnChangesTheRequest: an extension's beforeTurn
// result reaches the provider request, within what the rules allow.
func TestExtensionBeforeTurnChangesTheRequest(t *testing.T) {
	up := newFakeOpenAI(t)
	ext := newFakeExtension(t, extSecret, beforeTurnAnswer)
	g := newTestGateway(t, "extension",
		withUpstream(up, "", config.Agent{Name: "ext", Model: "up", System: "Be brief.", Tools: []string{"weather", "search", "delete"}}),
		withExtension("tuner", ext.URL, extSecret, 5*time.Second, 16, extension.HookBeforeTurn))
	var res turnResponse
	g.doJSON("POST", "/v1/agents/ext/sessions/s1/messages", map[string]any{"text": "hi"}, http.StatusOK, &res)
	if res.Status != engine.StatusCompleted {
		t.Fatalf("turn %+v", res)
	}
	body, header := up.last(t)
	if msgs := mustJSON(body["messages"]); !strings.Contains(msgs, `Be brief.\nExtension line.`) {
		t.Errorf("upstream messages %s lack the extension's system line", msgs)
	}
	if body["temperature"] != 0.5 || body["model"] != "gpt-test" || header.Get("X-Ext") != "yes" {
		t.Errorf("upstream temperature %v, model %v, X-Ext %q: want 0.5, gpt-test (model is not the extension's), yes",
			body["temperature"], body["model"], header.Get("X-Ext"))
	}
	var tools []string
	for _, tool := range body["tools"].([]any) {
		tools = append(tools, tool.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	slices.Sort(tools)
	if strings.Join(tools, ",") != "search,weather" {
		t.Errorf("upstream tools %v: want the rules' search and weather only (the extension cannot re-add delete)", tools)
	}
	if m := g.metricsText(); !strings.Contains(m, `turngate_extension_failures_total{extension="tuner",hook="beforeTurn",reason="invalid"} 2`) {
		t.Errorf("the model and stopWhen fields were not counted as invalid:\n%s", grepLines(m, "extension_"))
	}
}

// TestExtensionCannotRaiseTheStepCap: a model that calls a tool forever
// runs the rules' 2 steps, not the extension's 50.
func TestExtensionCannotRaiseTheStepCap(t *testing.T) {
	ext := newFakeExtension(t, extSecret, beforeTurnAnswer)
	g := newTestGateway(t, "extension", func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "loop", Type: config.ProviderScripted, Script: filepath.Join("testdata", "loop.yaml")})
		c.Models["loop"] = config.Model{Provider: "loop", Model: "loop"}
		c.Agents = append(c.Agents, config.Agent{Name: "looper", Model: "loop", Tools: []string{"search"}})
	}, withExtension("tuner", ext.URL, extSecret, 5*time.Second, 16, extension.HookBeforeTurn))
	var res turnResponse
	g.doJSON("POST", "/v1/agents/looper/sessions/s1/messages", map[string]any{"text": "loop"}, http.StatusOK, &res)
	calls := 0
	for _, p := range res.Message.Parts {
		if p.Type == "tool-search" {
			calls++
		}
	}
	if calls != 2 || len(ext.deliveries(extension.HookBeforeTurn)) != 1 {
		t.Errorf("%d search calls (%d beforeTurn deliveries), want 2: the rules' maxSteps caps the extension's 50", calls, len(ext.deliveries(extension.HookBeforeTurn)))
	}
}

// TestSlowExtension: an extension that does not answer within its
// timeout neither fails the turn nor changes it; the timeout is counted.
func TestSlowExtension(t *testing.T) {
	up := newFakeOpenAI(t)
	release := make(chan struct{})
	ext := newFakeExtension(t, extSecret, func(r *received) (int, string) {
		<-release
		return beforeTurnAnswer(r)
	})
	g := newTestGateway(t, "extension",
		withUpstream(up, "", config.Agent{Name: "ext", Model: "up", System: "Be brief.", Tools: []string{"weather"}}),
		withExtension("slow", ext.URL, extSecret, 50*time.Millisecond, 16, extension.HookBeforeTurn, extension.HookAfterToolCall))
	t.Cleanup(func() { close(release) }) // before the gateway's shutdown
	var res turnResponse
	g.doJSON("POST", "/v1/agents/ext/sessions/s1/messages", map[string]any{"text": "hi"}, http.StatusOK, &res)
	if res.Status != engine.StatusCompleted || textOf(res.Message) != fakeAnswer {
		t.Fatalf("turn %+v", res)
	}
	body, _ := up.last(t)
	if msgs := mustJSON(body["messages"]); strings.Contains(msgs, "Extension line") {
		t.Errorf("the late answer changed the request: %s", msgs)
	}
	if m := g.metricsText(); !strings.Contains(m, `turngate_extension_failures_total{extension="slow",hook="beforeTurn",reason="timeout"} 1`) {
		t.Errorf("the timeout was not counted:\n%s", grepLines(m, "extension_"))
	}
}

// TestExtensionWrongSecret: an extension holding another secret rejects
// every delivery (the HMAC does not verify); the gateway counts the
// failures and the turn completes.
func TestExtensionWrongSecret(t *testing.T) {
	ext := newFakeExtension(t, "another-secret-entirely", beforeTurnAnswer)
	g := newTestGateway(t, "basic", withExtension("mismatch", ext.URL, extSecret, 5*time.Second, 16, extension.HookBeforeTurn))
	var res turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "hi"}, http.StatusOK, &res)
	if res.Status != engine.StatusCompleted {
		t.Fatalf("turn %+v", res)
	}
	ext.mu.Lock()
	forged, err := ext.forged, ext.verifyErr
	ext.mu.Unlock()
	if forged != 1 || err != extension.ErrBadSignature {
		t.Errorf("forged %d, verify error %v: want 1, %v", forged, err, extension.ErrBadSignature)
	}
	if m := g.metricsText(); !strings.Contains(m, `turngate_extension_failures_total{extension="mismatch",hook="beforeTurn",reason="error"} 1`) {
		t.Errorf("the rejected delivery was not counted:\n%s", grepLines(m, "extension_"))
	}
}

// TestExtensionChunkBatches: onChunk arrives in batches, in stream order,
// in fewer requests than chunks.
func TestExtensionChunkBatches(t *testing.T) {
	ext := newFakeExtension(t, extSecret, nil)
	g := newTestGateway(t, "basic", withExtension("chunks", ext.URL, extSecret, 5*time.Second, 1024,
		extension.HookOnChunk, extension.HookOnStepFinish))
	var res turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "tell me a long story"}, http.StatusOK, &res)
	waitFor(t, "onStepFinish", func() bool { return len(ext.deliveries(extension.HookOnStepFinish)) == 1 })
	batches := ext.deliveries(extension.HookOnChunk)
	var text strings.Builder
	chunks := 0
	for _, b := range batches {
		for _, c := range b.Snapshots {
			chunks++
			if c.Type == "text-delta" {
				text.WriteString(c.Text)
			}
		}
	}
	if text.String() != textOf(res.Message) {
		t.Errorf("the chunks spell %q, want the answer %q in order", text.String(), textOf(res.Message))
	}
	if len(batches) == 0 || len(batches) >= chunks {
		t.Errorf("%d onChunk deliveries for %d chunks: want batches", len(batches), chunks)
	}
	if last := ext.deliveries("")[len(ext.deliveries(""))-1]; last.Hook != extension.HookOnStepFinish {
		t.Errorf("the last delivery is %s: every chunk batch must precede its step's onStepFinish", last.Hook)
	}
}

// TestExtensionQueueOverflow: observations beyond a stuck extension's
// queue are dropped and counted; the turn does not wait for them.
func TestExtensionQueueOverflow(t *testing.T) {
	release := make(chan struct{})
	ext := newFakeExtension(t, extSecret, func(*received) (int, string) {
		<-release
		return http.StatusNoContent, ""
	})
	g := newTestGateway(t, "basic", withExtension("stuck", ext.URL, extSecret, time.Minute, 1, extension.HookOnChunk))
	t.Cleanup(func() { close(release) })
	var res turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "tell me a long story"}, http.StatusOK, &res)
	if res.Status != engine.StatusCompleted {
		t.Fatalf("turn %+v", res)
	}
	m := g.metricsText()
	if !strings.Contains(m, `turngate_extension_dropped_total{extension="stuck",hook="onChunk"}`) {
		t.Errorf("no drop counted:\n%s", grepLines(m, "extension_"))
	}
}

// TestHostileExtension: an answer over the size limit, or not JSON, is
// an invalid answer: counted, and the turn goes on unchanged.
func TestHostileExtension(t *testing.T) {
	tests := []struct{ name, body string }{
		{"huge", `{"result":{"system":"` + strings.Repeat("x", extension.MaxResponseBytes) + `"}}`},
		{"not JSON", `<html>hello</html>`},
		{"two objects", `{"result":{}} {"result":{}}`},
		{"result of the wrong type", `{"result":"system"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newFakeOpenAI(t)
			ext := newFakeExtension(t, extSecret, func(*received) (int, string) { return http.StatusOK, tc.body })
			g := newTestGateway(t, "extension",
				withUpstream(up, "", config.Agent{Name: "ext", Model: "up", System: "Be brief."}),
				withExtension("hostile", ext.URL, extSecret, 5*time.Second, 16, extension.HookBeforeTurn))
			var res turnResponse
			g.doJSON("POST", "/v1/agents/ext/sessions/s1/messages", map[string]any{"text": "hi"}, http.StatusOK, &res)
			if res.Status != engine.StatusCompleted {
				t.Fatalf("turn %+v", res)
			}
			if msgs := mustJSON(mustFirst(up.last(t))["messages"]); strings.Contains(msgs, "xxx") {
				t.Errorf("the hostile answer reached the request")
			}
			if m := g.metricsText(); !strings.Contains(m, `turngate_extension_failures_total{extension="hostile",hook="beforeTurn",reason="invalid"} 1`) {
				t.Errorf("the answer was not counted invalid:\n%s", grepLines(m, "extension_"))
			}
		})
	}
}

func mustFirst[A, B any](a A, _ B) A { return a }

// BenchmarkChatTurnExtension is BenchmarkChatTurn without extensions,
// with one http extension subscribed to beforeTurn only (one synchronous
// round trip per turn), and subscribed to every hook. The extension is an
// in-process httptest server answering at once, so its own work counts
// too.
func BenchmarkChatTurnExtension(b *testing.B) {
	for _, bc := range []struct {
		name  string
		hooks []string
	}{
		{"off", nil},
		{"beforeTurn", []string{extension.HookBeforeTurn}},
		{"allHooks", config.ExtensionHooks},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := testConfig(b, "basic")
			if bc.hooks != nil {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					w.WriteHeader(http.StatusNoContent)
				}))
				b.Cleanup(srv.Close)
				withExtension("bench", srv.URL, extSecret, 5*time.Second, 1024, bc.hooks...)(cfg)
			}
			b.ReportAllocs()
			g := startGateway(b, cfg, Options{})
			chatTurns(b, g)
			b.StopTimer()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = g.shutdown(ctx)
		})
	}
}
