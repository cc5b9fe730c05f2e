package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
)

// seenTurn is what turnObserver saw of one turn.
type seenTurn struct {
	continuation bool
	body         map[string]any
	subject      string
	// stored is the text of the store's last message in beforeTurn, when it
	// is a user message.
	stored string
	// responded is set by onChatResponse.
	responded bool
}

// turnObserver records, per entry path, each turn's beforeTurn context (and
// what the store held then) and whether onChatResponse fired.
type turnObserver struct {
	engine.NopHooks
	g     **testGateway
	mu    sync.Mutex
	turns map[string]*seenTurn
}

func newTurnObserver(g **testGateway) *turnObserver {
	return &turnObserver{g: g, turns: map[string]*seenTurn{}}
}

func (o *turnObserver) BeforeTurn(ctx context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	seen := &seenTurn{continuation: tc.Continuation, body: tc.Body, subject: tc.Principal.Subject}
	if tc.EntryPath != engine.EntryOpenAI {
		msgs, err := (*o.g).store.Messages(ctx, tc.Principal.Tenant, tc.SessionID)
		if n := len(msgs); err == nil && n > 0 && msgs[n-1].Role == engine.RoleUser {
			seen.stored = textOf(msgs[n-1])
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.turns[tc.EntryPath] = seen
	return nil, nil
}

func (o *turnObserver) OnChatResponse(_ context.Context, r *engine.ChatResponseResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if seen := o.turns[r.EntryPath]; seen != nil {
		seen.responded = true
	}
}

// seen returns what the observer saw of entry's last turn.
func (o *turnObserver) seen(entry string) seenTurn {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.turns[entry]; s != nil {
		return *s
	}
	return seenTurn{}
}

func TestUserMessageStoredBeforeTheModelRuns(t *testing.T) {
	var g *testGateway
	obs := newTurnObserver(&g)
	g = startGateway(t, testConfig(t, "basic"), Options{Observer: obs})
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "from chat")))
	g.doJSON("POST", "/v1/agents/demo/sessions/s2/messages", map[string]any{"text": "from saveMessages"}, http.StatusOK, nil)
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s3/messages", map[string]any{"text": "from submitMessages", "async": true}, http.StatusAccepted, &sub)
	waitSubmission(t, g, "demo", "s3", sub.SubmissionID)
	want := map[string]string{
		engine.EntryChat:           "from chat",
		engine.EntrySaveMessages:   "from saveMessages",
		engine.EntrySubmitMessages: "from submitMessages",
	}
	for entry, text := range want {
		if got := obs.seen(entry).stored; got != text {
			t.Errorf("%s: in beforeTurn the store's last user message is %q, want %q", entry, got, text)
		}
	}
}

// TestEntryPathsFireHooks runs every entry path and checks what the hooks
// see: the entry path, continuation, the request's custom body (or the
// session's stored one) and the principal; and that onChatResponse fires.
func TestEntryPathsFireHooks(t *testing.T) {
	var g *testGateway
	obs := newTurnObserver(&g)
	g = startGateway(t, testConfig(t, "basic"), Options{Observer: obs})
	chat := chatBody("s1", "u1", "please confirm", "mode", "chat-extra")
	chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chat))
	if chunks[len(chunks)-1].str("finishReason") != "tool-calls" {
		t.Fatalf("the client tool turn ended %v", chunks[len(chunks)-1])
	}
	msgs := g.history("demo", "s1")
	asst := msgs[1]
	for i, p := range asst.Parts {
		if p.Type == "tool-confirm" {
			asst.Parts[i].State, asst.Parts[i].Output = engine.ToolStateOutputAvailable, json.RawMessage(`"yes"`)
		}
	}
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", map[string]any{"id": "s1", "trigger": "submit-message",
		"messageId": asst.ID, "messages": []any{msgs[0], asst}, "mode": "tool-extra"}))
	g.doJSON("POST", "/v1/agents/demo/sessions/s2/messages", map[string]any{"text": "weather in Rome", "body": map[string]any{"mode": "save"}}, http.StatusOK, nil)
	g.doJSON("POST", "/v1/agents/demo/sessions/s2/continue", nil, http.StatusOK, nil)
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s3/messages", map[string]any{"text": "hi", "async": true, "body": map[string]any{"mode": "submit"}}, http.StatusAccepted, &sub)
	waitSubmission(t, g, "demo", "s3", sub.SubmissionID)
	g.doJSON("POST", "/v1/chat/completions", map[string]any{"model": "demo", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, http.StatusOK, nil)

	tests := []struct {
		entry        string
		continuation bool
		mode         any // the body's "mode"; nil for no body
	}{
		{engine.EntryChat, false, "chat-extra"},
		{engine.EntryToolResult, true, "tool-extra"},
		{engine.EntrySaveMessages, false, "save"},
		{engine.EntryContinueLastTurn, true, "save"}, // no body sent: the session's last one
		{engine.EntrySubmitMessages, false, "submit"},
		{engine.EntryOpenAI, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.entry, func(t *testing.T) {
			seen := obs.seen(tc.entry)
			if seen.subject != "anonymous" {
				t.Fatalf("beforeTurn did not fire with the principal (saw %+v)", seen)
			}
			if seen.continuation != tc.continuation {
				t.Errorf("continuation %v, want %v", seen.continuation, tc.continuation)
			}
			if seen.body["mode"] != tc.mode {
				t.Errorf("body %v, want mode %v", seen.body, tc.mode)
			}
			waitFor(t, "onChatResponse", func() bool { return obs.seen(tc.entry).responded })
		})
	}
}

func TestPartialMessagePersistedOnUpstreamError(t *testing.T) {
	up := newFakeOpenAI(t)
	up.cut = true
	g := newTestGateway(t, "basic", withUpstream(up, "sk-secret-upstream", config.Agent{Name: "remote", Model: "up", MaxRetries: new(0)}))

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

// TestRefusedTurnStoresNothing checks that admission is stored with the
// turn's first write: a chat request refused before it (here a messageId
// naming no message) creates no session and stores no body.
func TestRefusedTurnStoresNothing(t *testing.T) {
	g := newTestGateway(t, "basic")
	resp := g.do("POST", "/v1/agents/demo/chat", chatBody("fresh", "u1", "hi", "messageId", "nope", "body", map[string]any{"k": 1}))
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	if _, err := g.store.GetSession(context.Background(), "default", "fresh"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after a refused first turn GetSession = %v, want ErrNotFound", err)
	}
}
