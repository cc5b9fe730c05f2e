package gateway

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
)

// storedBeforeModel checks, in beforeTurn (before the first model step),
// that the turn's user message is already in the store.
type storedBeforeModel struct {
	engine.NopHooks
	g      **testGateway
	mu     sync.Mutex
	checks map[string]string // entry path → the stored last message's text
}

func (o *storedBeforeModel) BeforeTurn(ctx context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	msgs, err := (*o.g).store.Messages(ctx, tc.Principal.Tenant, tc.SessionID)
	got := "error: "
	if err != nil {
		got += err.Error()
	} else if n := len(msgs); n > 0 && msgs[n-1].Role == engine.RoleUser {
		got = textOf(msgs[n-1])
	} else {
		got = "no user message stored"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checks[tc.EntryPath] = got
	return nil, nil
}

func TestUserMessageStoredBeforeTheModelRuns(t *testing.T) {
	var g *testGateway
	obs := &storedBeforeModel{g: &g, checks: map[string]string{}}
	g = startGateway(t, testConfig(t, "basic"), Options{Observer: obs})
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "from chat")))
	g.doJSON("POST", "/v1/agents/demo/sessions/s2/messages", map[string]any{"text": "from saveMessages"}, http.StatusOK, nil)
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s3/messages", map[string]any{"text": "from submitMessages", "async": true}, http.StatusAccepted, &sub)
	waitSubmission(t, g, "demo", "s3", sub.SubmissionID)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := map[string]string{
		engine.EntryChat:           "from chat",
		engine.EntrySaveMessages:   "from saveMessages",
		engine.EntrySubmitMessages: "from submitMessages",
	}
	for entry, text := range want {
		if obs.checks[entry] != text {
			t.Errorf("%s: in beforeTurn the store's last message is %q, want the user's %q", entry, obs.checks[entry], text)
		}
	}
}

func TestPartialMessagePersistedOnUpstreamError(t *testing.T) {
	up := newFakeOpenAI(t)
	up.cut = true
	cfg := testConfig(t, "basic")
	cfg.Providers = append(cfg.Providers, config.Provider{Name: "up", Type: config.ProviderOpenAI, BaseURL: up.URL + "/v1", APIKey: "sk-secret-upstream"})
	cfg.Models["up"] = config.Model{Provider: "up", Model: "gpt-test"}
	cfg.Agents = append(cfg.Agents, config.Agent{Name: "remote", Model: "up", MaxRetries: new(0)})
	g := startGateway(t, cfg, Options{})

	chunks, raw := readUIStreamRaw(t, g.do("POST", "/v1/agents/remote/chat", chatBody("s1", "u1", "hi")))
	var errorText string
	for _, c := range chunks {
		if c.str("type") == "error" {
			errorText = c.str("errorText")
		}
	}
	if last := chunks[len(chunks)-1]; errorText == "" || last.str("finishReason") != "error" {
		t.Fatalf("stream %s, want an error chunk and finishReason error", raw)
	}
	for _, internal := range []string{up.URL, "sk-secret-upstream", "goroutine", ".go:"} {
		if strings.Contains(string(raw), internal) {
			t.Errorf("the stream shows %q: %s", internal, raw)
		}
	}
	msgs := g.history("remote", "s1")
	if len(msgs) != 2 || msgs[1].Role != engine.RoleAssistant || !strings.Contains(textOf(msgs[1]), fakeAnswer) {
		t.Fatalf("history %+v, want the user message and the partial answer", msgs)
	}
	if msgs[1].ID != chunks[0].str("messageId") {
		t.Errorf("persisted partial %q is not the streamed message %q", msgs[1].ID, chunks[0].str("messageId"))
	}
	recs, err := g.store.Turns(t.Context(), "default", "s1")
	if err != nil || len(recs) != 1 || recs[0].Status != engine.StatusError {
		t.Errorf("turn records %+v, %v; want one error", recs, err)
	}
}
