package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
)

// fakeOpenAI is an OpenAI-compatible upstream at the edge of the world: it
// records each chat completions request and answers with one text stream.
type fakeOpenAI struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []map[string]any
	headers  []http.Header
	failures int // answer this many requests with a retryable 500 first
	// cut ends every stream after its text delta, without a finish.
	cut bool
}

// fakeReasoning and fakeAnswer are what the fake upstream streams.
const (
	fakeReasoning = "The user greets me."
	fakeAnswer    = "Hello from upstream."
)

func newFakeOpenAI(t *testing.T) *fakeOpenAI {
	f := &fakeOpenAI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("upstream request body %s: %v", data, err)
		}
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.headers = append(f.headers, r.Header.Clone())
		fail := f.failures > 0
		f.failures--
		f.mu.Unlock()
		if fail {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"upstream is down","type":"server_error"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunks := []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"` + fakeReasoning + `"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"` + fakeAnswer + `"},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
			`[DONE]`,
		}
		if f.cut {
			chunks = chunks[:2]
		}
		for _, chunk := range chunks {
			_, _ = io.WriteString(w, "data: "+chunk+"\n\n")
		}
	}))
	t.Cleanup(f.Close)
	return f
}

// last returns the last request's body and headers.
func (f *fakeOpenAI) last(t *testing.T) (map[string]any, http.Header) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		t.Fatal("the upstream received no request")
	}
	return f.bodies[len(f.bodies)-1], f.headers[len(f.headers)-1]
}

// withUpstream adds the provider "up" (the fake upstream, with key apiKey)
// and its model alias "up" to a config, and agents.
func withUpstream(up *fakeOpenAI, apiKey string, agents ...config.Agent) func(*config.Config) {
	return func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "up", Type: config.ProviderOpenAI, BaseURL: up.URL + "/v1",
			APIKey: apiKey, Headers: map[string]string{"X-Provider": "p"}})
		c.Models["up"] = config.Model{Provider: "up", Model: "gpt-test"}
		c.Agents = append(c.Agents, agents...)
	}
}

// stepWarnings records the provider warnings of every step.
type stepWarnings struct {
	engine.NopHooks
	mu       sync.Mutex
	warnings []string
}

func (o *stepWarnings) OnStepFinish(_ context.Context, s *engine.StepResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.warnings = append(o.warnings, s.Warnings...)
}

// TestAgentDefaultsReachTheProvider configures every TurnConfig default an
// agent has and checks each one in the upstream request the turn makes.
func TestAgentDefaultsReachTheProvider(t *testing.T) {
	up := newFakeOpenAI(t)
	tuned, err := config.Parse("agent.yaml", []byte(`
providers: [{name: up, type: openai, apiKey: test-key}]
models: {up: {provider: up, model: gpt-test}}
tools: [{name: weather, builtin: weather}, {name: search, builtin: search}]
agents:
  - name: tuned
    model: up
    system: Be brief.
    tools: [weather, search]
    maxSteps: 2
    activeTools: [weather]
    toolChoice: required
    temperature: 0.25
    topP: 0.5
    topK: 7
    presencePenalty: 0.125
    frequencyPenalty: 0.375
    stopSequences: [STOP]
    seed: 42
    maxOutputTokens: 99
    sendReasoning: false
    maxRetries: 0
    timeout: {total: 1m, chunk: 30s}
    headers: {X-Agent: tuned}
    providerOptions: {up: {user: agent-user, reasoning_effort: low}, other: {ignored: true}}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "basic")
	withUpstream(up, "sk-upstream", tuned.Agents[0])(cfg)
	obs := &stepWarnings{}
	g := startGateway(t, cfg, Options{Observer: obs})

	var res turnResponse
	g.doJSON("POST", "/v1/agents/tuned/sessions/s1/messages", map[string]any{"text": "hi"}, http.StatusOK, &res)
	if res.Status != engine.StatusCompleted || textOf(res.Message) != fakeAnswer {
		t.Fatalf("turn %+v", res)
	}
	body, header := up.last(t)
	want := map[string]any{
		"model": "gpt-test", "temperature": 0.25, "top_p": 0.5, "presence_penalty": 0.125, "frequency_penalty": 0.375,
		"seed": float64(42), "max_tokens": float64(99), "tool_choice": "required", "user": "agent-user", "reasoning_effort": "low",
	}
	for k, v := range want {
		if body[k] != v {
			t.Errorf("upstream body %s = %v, want %v", k, body[k], v)
		}
	}
	if stop, _ := json.Marshal(body["stop"]); string(stop) != `["STOP"]` {
		t.Errorf("upstream stop = %s, want the agent's stopSequences", stop)
	}
	if _, ok := body["ignored"]; ok {
		t.Error("another provider's providerOptions reached the request")
	}
	tools, _ := body["tools"].([]any)
	if len(tools) != 1 || !strings.Contains(mustJSON(tools[0]), `"name":"weather"`) {
		t.Errorf("upstream tools %s, want only the active weather tool", mustJSON(tools))
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 || !strings.Contains(mustJSON(msgs[0]), "Be brief.") {
		t.Errorf("upstream messages %s do not start with the agent's system prompt", mustJSON(msgs))
	}
	if header.Get("X-Agent") != "tuned" || header.Get("X-Provider") != "p" || header.Get("Authorization") != "Bearer sk-upstream" {
		t.Errorf("upstream headers %v", header)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if !strings.Contains(strings.Join(obs.warnings, "\n"), "topK") {
		t.Errorf("step warnings %q: topK did not reach the provider (which warns that it cannot send it)", obs.warnings)
	}
}

// TestSendReasoning checks that reasoning reaches the UI stream and the
// stored message by default, not for an agent with sendReasoning: false,
// and that a beforeTurn rule's sendReasoning overrides the agent's either
// way.
func TestSendReasoning(t *testing.T) {
	up := newFakeOpenAI(t)
	rules := filepath.Join(t.TempDir(), "rules")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rules, "turn.yaml"), []byte(`beforeTurn:
  - name: hide-reasoning
    when: has(turn.body.reasoning) && turn.body.reasoning == "hide"
    set:
      sendReasoning: 'false'
  - name: show-reasoning
    when: has(turn.body.reasoning) && turn.body.reasoning == "show"
    set:
      sendReasoning: 'true'
`), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newTestGateway(t, "basic", withUpstream(up, "",
		config.Agent{Name: "thinker", Model: "up"},
		config.Agent{Name: "quiet", Model: "up", SendReasoning: new(false)}),
		func(c *config.Config) { c.Rules.Dir = rules })
	tests := []struct {
		name, agent, body string // body: the request's reasoning field, "" for none
		reasoning         bool
	}{
		{"agent default", "thinker", "", true},
		{"agent sendReasoning false", "quiet", "", false},
		{"rule hides", "thinker", "hide", false},
		{"rule shows", "quiet", "show", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			session := "s-" + strings.ReplaceAll(tc.name, " ", "-")
			var extra []any
			if tc.body != "" {
				extra = []any{"reasoning", tc.body}
			}
			chunks := readUIStream(t, g.do("POST", "/v1/agents/"+tc.agent+"/chat", chatBody(session, "u1", "hi", extra...)))
			var reasoning strings.Builder
			for _, c := range chunks {
				if strings.HasPrefix(c.str("type"), "reasoning-") {
					reasoning.WriteString(c.str("delta"))
				}
			}
			if got := reasoning.String() == fakeReasoning; got != tc.reasoning {
				t.Errorf("reasoning in the stream %q, want it sent: %v (%s)", reasoning.String(), tc.reasoning, strings.Join(types(chunks), ","))
			}
			msgs := g.history(tc.agent, session)
			stored := false
			for _, p := range msgs[len(msgs)-1].Parts {
				stored = stored || (p.Type == engine.PartReasoning && p.Text == fakeReasoning)
			}
			if stored != tc.reasoning {
				t.Errorf("stored message %s: reasoning part %v, want %v", mustJSON(msgs[len(msgs)-1]), stored, tc.reasoning)
			}
		})
	}
}
