package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
)

// reply is what the scripted upstream answers one request with.
type reply struct {
	// status, when set, fails the request with errBody.
	status  int
	errBody string
	text    string
	// call is a tool call: name and JSON arguments.
	call, args string
	// promptTokens and cachedTokens are the usage it reports.
	promptTokens, cachedTokens int
}

// scriptUpstream is an OpenAI- and Anthropic-compatible upstream at the
// edge of the world: it records every request body and answers each with
// what script returns for it.
type scriptUpstream struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	script func(n int, body string) reply
}

func newScriptUpstream(t *testing.T, script func(n int, body string) reply) *scriptUpstream {
	u := &scriptUpstream{script: script}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		n := len(u.bodies)
		u.bodies = append(u.bodies, string(data))
		u.mu.Unlock()
		rep := u.script(n, string(data))
		if rep.status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(rep.status)
			_, _ = io.WriteString(w, rep.errBody)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasSuffix(r.URL.Path, "/messages") {
			writeAnthropic(w, rep)
		} else {
			writeOpenAI(w, rep)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func writeOpenAI(w io.Writer, rep reply) {
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, finish)
	}
	finish := `"stop"`
	if rep.text != "" {
		chunk(`{"role":"assistant","content":`+mustJSON(rep.text)+`}`, "null")
	}
	if rep.call != "" {
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"`+rep.call+`","arguments":`+mustJSON(rep.args)+`}}]}`, "null")
		finish = `"tool_calls"`
	}
	chunk(`{}`, finish)
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":5,\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}}}\n\ndata: [DONE]\n\n",
		rep.promptTokens, rep.promptTokens+5, rep.cachedTokens)
}

func writeAnthropic(w io.Writer, rep reply) {
	event := func(typ, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data) }
	event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"usage":{"input_tokens":%d,"cache_read_input_tokens":%d,"output_tokens":1}}}`,
		rep.promptTokens-rep.cachedTokens, rep.cachedTokens))
	stop, i := "end_turn", 0
	if rep.text != "" {
		event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
		event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, mustJSON(rep.text)))
		event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
		i++
	}
	if rep.call != "" {
		event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":"toolu_1","name":%q,"input":{}}}`, i, rep.call))
		event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, mustJSON(rep.args)))
		event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
		stop = "tool_use"
	}
	event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`"},"usage":{"output_tokens":5}}`)
	event("message_stop", `{"type":"message_stop"}`)
}

// requests returns the recorded request bodies, indented, one section
// each: what the golden files compare.
func (u *scriptUpstream) requests(t *testing.T) []byte {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	var out bytes.Buffer
	for i, b := range u.bodies {
		fmt.Fprintf(&out, "### request %d\n", i)
		if err := json.Indent(&out, []byte(b), "", "  "); err != nil {
			t.Fatalf("request %d is not JSON: %v", i, err)
		}
		out.WriteString("\n")
	}
	return out.Bytes()
}

// body returns request n's body.
func (u *scriptUpstream) body(n int) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if n < 0 {
		n += len(u.bodies)
	}
	return u.bodies[n]
}

// isSummarize reports a compaction model request.
func isSummarize(body string) bool { return strings.Contains(body, "Summarize the conversation below") }

// sessionGateway starts a gateway whose agent "mem" runs on the upstream
// (openai or anthropic) with the session configuration sessionYAML, and
// the rules of testdata/rules/session.
func sessionGateway(t *testing.T, up *scriptUpstream, provider, sessionYAML string) *testGateway {
	t.Helper()
	return upstreamGateway(t, up, provider, `
agents:
  - name: mem
    model: up
    system: Not used with context blocks.
    session:
`+indent(sessionYAML, "      "))
}

// upstreamGateway starts a gateway with the test config plus the tools and
// agents of doc (YAML), whose model alias up is provider's API on up.
func upstreamGateway(t *testing.T, up *scriptUpstream, provider, doc string) *testGateway {
	t.Helper()
	baseURL := up.URL + "/v1"
	if provider == config.ProviderAnthropic {
		baseURL = up.URL
	}
	doc = fmt.Sprintf(`
providers: [{name: up, type: %s, apiKey: test-key, baseURL: %q}]
models: {up: {provider: up, model: test-model}}
%s`, provider, baseURL, doc)
	parsed, err := config.Parse("session.yaml", []byte(doc), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "session")
	cfg.Providers = append(cfg.Providers, parsed.Providers...)
	cfg.Models["up"] = parsed.Models["up"]
	cfg.Tools = append(cfg.Tools, parsed.Tools...)
	cfg.Agents = append(cfg.Agents, parsed.Agents...)
	cfg.Audit.Sink = config.SinkStdout
	return startGateway(t, cfg, Options{})
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// A sub-agent with a session configuration runs with it: its system prompt
// assembled from its own context blocks (cachedPrompt: ordered, and marked
// on Anthropic), its writable block shown empty, no update_context or
// search_history (a sub-agent's session is the call's own, not stored),
// while the parent keeps its own prompt. The golden holds the parent's two
// requests and, between them, the sub-agent's.
func TestSessionContextSubAgent(t *testing.T) {
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			policy := filepath.Join(t.TempDir(), "policy.md")
			if err := os.WriteFile(policy, []byte("Refunds within 30 days.\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			up := newScriptUpstream(t, func(n int, _ string) reply {
				switch n {
				case 0:
					return reply{call: "ask_clerk", args: `{"prompt":"May I get a refund after 20 days?"}`, promptTokens: 40}
				case 1:
					return reply{text: "Yes: refunds are within 30 days.", promptTokens: 60}
				}
				return reply{text: "The clerk says yes.", promptTokens: 80}
			})
			g := upstreamGateway(t, up, provider, fmt.Sprintf(`
tools:
  - {name: ask_clerk, description: Ask the refunds clerk., agent: {agent: clerk}}
agents:
  - {name: lead, model: up, system: You lead the support team., tools: [ask_clerk]}
  - name: clerk
    model: up
    system: Not used with context blocks.
    session:
      context:
        - {name: memory, description: What the clerk noted., writable: true, maxTokens: 50}
        - {name: soul, text: You are the refunds clerk.}
        - {name: policy, description: The refund policy., file: %s}
      cachedPrompt: true
      historySearch: true
`, policy))
			var res turnResponse
			g.doJSON("POST", "/v1/agents/lead/sessions/s1/messages", map[string]any{"text": "Can I get a refund?"}, http.StatusOK, &res)
			if res.Status != engine.StatusCompleted || !strings.Contains(up.body(2), "Yes: refunds are within 30 days.") {
				t.Fatalf("turn %+v, last request %s", res, up.body(-1))
			}
			golden(t, "session-subagent-"+provider+".txt", up.requests(t))
		})
	}
}

// A sub-agent whose context block is unavailable (no fallback) does not
// run: the parent's model gets the call's tool error naming the block, not
// the source's failure.
func TestSessionContextSubAgentBlockUnavailable(t *testing.T) {
	cms := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cms down: secret-host:5432", http.StatusBadGateway)
	}))
	defer cms.Close()
	up := newScriptUpstream(t, func(n int, _ string) reply {
		if n == 0 {
			return reply{call: "ask_clerk", args: `{"prompt":"Any notices?"}`}
		}
		return reply{text: "The clerk is unavailable."}
	})
	g := upstreamGateway(t, up, config.ProviderOpenAI, fmt.Sprintf(`
tools:
  - {name: ask_clerk, agent: {agent: clerk}}
agents:
  - {name: lead, model: up, tools: [ask_clerk]}
  - name: clerk
    model: up
    session:
      context:
        - {name: notices, http: {url: %q}}
`, cms.URL))
	var res turnResponse
	g.doJSON("POST", "/v1/agents/lead/sessions/s1/messages", map[string]any{"text": "Any notices?"}, http.StatusOK, &res)
	if res.Status != engine.StatusCompleted || len(up.bodies) != 2 {
		t.Fatalf("turn %+v after %d upstream requests, want the parent's two", res, len(up.bodies))
	}
	want := `sub-agent clerk: context block \"notices\" is unavailable: its source failed and it has no fallback`
	if body := up.body(1); !strings.Contains(body, want) || strings.Contains(body, "secret-host") {
		t.Errorf("the parent's model saw %s, want the tool error %s", body, want)
	}
}

// say runs one saveMessages turn of agent mem in session and returns it.
func (g *testGateway) say(session, text string) turnResponse {
	g.t.Helper()
	var res turnResponse
	g.doJSON("POST", "/v1/agents/mem/sessions/"+session+"/messages", map[string]any{"text": text}, http.StatusOK, &res)
	return res
}

// TestSessionContextFlow runs a conversation on each provider through the
// whole session configuration and compares every upstream request body
// with a golden file: the system prompt built from the blocks (text, file,
// http, writable), the model's memory write shown in the next turn's
// prompt, a compaction triggered by the reported input tokens (the
// summarize request, then summary + recent messages), the rules reacting
// to turn.context and turn.compacted, and with cachedPrompt Anthropic's
// cache breakpoints.
func TestSessionContextFlow(t *testing.T) {
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			guidance := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "Tenant guidance: be kind.")
			}))
			defer guidance.Close()
			rulesFile := filepath.Join(t.TempDir(), "rules.md")
			if err := os.WriteFile(rulesFile, []byte("Answer in English.\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			up := newScriptUpstream(t, func(n int, body string) reply {
				switch {
				case isSummarize(body):
					return reply{text: "The user likes tea and asked twice about the weather.", promptTokens: 50}
				case n == 0:
					return reply{call: "update_context", args: `{"block":"memory","content":"The user likes tea."}`, promptTokens: 100}
				case n == 2:
					// The second turn reports a conversation past compaction.after.
					return reply{text: "Noted.", promptTokens: 5000, cachedTokens: 4000}
				}
				return reply{text: "Noted.", promptTokens: 120, cachedTokens: 80}
			})
			g := sessionGateway(t, up, provider, fmt.Sprintf(`
context:
  - name: soul
    text: You are a helpful assistant.
  - name: memory
    description: Facts about the user.
    writable: true
    maxTokens: 50
  - name: rules
    file: %s
  - name: guidance
    http: {url: %q}
compaction: {after: 1000, model: up, keepLast: 2}
cachedPrompt: true
`, rulesFile, guidance.URL))
			for i, text := range []string{"I like tea.", "What is the weather?", "And tomorrow?"} {
				if res := g.say("s1", text); res.Status != engine.StatusCompleted {
					t.Fatalf("turn %d: %+v", i, res)
				}
				if i == 0 {
					// The file block is read again when it changes.
					if err := os.WriteFile(rulesFile, []byte("Answer in English or French.\n"), 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			golden(t, "session-flow-"+provider+".txt", up.requests(t))

			st, err := g.store.SessionState(context.Background(), "default", "s1")
			if err != nil || st.Blocks["memory"] != "The user likes tea." {
				t.Errorf("stored memory %+v, %v", st, err)
			}
			cs, err := g.store.Compactions(context.Background(), "default", "s1")
			if err != nil || len(cs) != 1 || cs[0].Reason != store.CompactThreshold || cs[0].InputTokens != 5000 || cs[0].MessageCount != 2 {
				t.Fatalf("compactions %+v, %v", cs, err)
			}
			hist := g.history("mem", "s1")
			if len(hist) != 6 || hist[cs[0].MessageCount-1].ID != cs[0].ThroughMessageID {
				t.Errorf("history has %d messages (want all 6), compaction through %q", len(hist), cs[0].ThroughMessageID)
			}
			last := up.body(-1)
			if strings.Contains(last, "I like tea.") || !strings.Contains(last, "The user likes tea and asked twice") {
				t.Errorf("the request after compaction still sends the old messages or lacks the summary: %s", last)
			}
			if a := g.auditLog(); !strings.Contains(a, `"kind":"compaction"`) || !strings.Contains(a, `"cachedInputTokens":4000`) {
				t.Errorf("audit log lacks the compaction or the cached tokens:\n%s", a)
			}
			// Model steps 1 and 4 report 80 cached tokens, step 2 4000 (the summarize request is no step).
			m := g.srv.metrics
			if cached := testutil.ToFloat64(m.InputTokens.WithLabelValues("mem", "default", "cached")); cached != 4160 {
				t.Errorf("turngate_input_tokens_total{kind=cached} = %v, want 4160", cached)
			}
			if n := testutil.ToFloat64(m.Compactions.WithLabelValues("mem", store.CompactThreshold)); n != 1 {
				t.Errorf("turngate_compactions_total = %v, want 1", n)
			}
		})
	}
}

// TestMemoryWritesTheModelDoesNotGetToKeep: a write a Rego rule blocks and
// a write over the block's maxTokens both reach the model as the tool's
// answer, and neither is stored or shown in the next prompt.
func TestMemoryWritesTheModelDoesNotGetToKeep(t *testing.T) {
	tests := []struct {
		name, content, wantTool string
	}{
		{"blocked by a rule", "My password is hunter2.", "memory writes must not hold secrets"},
		{"over maxTokens", strings.Repeat("tea ", 40), "over the 10 block \\\"memory\\\" may hold"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := newScriptUpstream(t, func(n int, _ string) reply {
				if n == 0 {
					return reply{call: "update_context", args: mustJSON(map[string]string{"block": "memory", "content": tc.content})}
				}
				return reply{text: "Noted."}
			})
			g := sessionGateway(t, up, config.ProviderOpenAI, `
context:
  - {name: memory, writable: true, maxTokens: 10}
`)
			g.say("s1", "Remember this.")
			if toolTurn := up.body(1); !strings.Contains(toolTurn, tc.wantTool) {
				t.Errorf("the model was not told %q: %s", tc.wantTool, toolTurn)
			}
			g.say("s1", "Next.")
			if next := up.body(2); !strings.Contains(next, `## memory (writable with the update_context tool, at most 10 tokens)\n(empty)`) {
				t.Errorf("the next prompt shows a memory: %s", next)
			}
			if st, err := g.store.SessionState(context.Background(), "default", "s1"); err != nil || len(st.Blocks) != 0 {
				t.Errorf("stored blocks %v, %v", st.Blocks, err)
			}
		})
	}
}

// TestReactiveCompaction: the upstream rejects a step as overflowing the
// context window; the gateway compacts once and the retried step sends
// the summary and the recent messages. A second overflow is the turn's
// error.
func TestReactiveCompaction(t *testing.T) {
	for _, provider := range []string{config.ProviderOpenAI, config.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			overflow := `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`
			if provider == config.ProviderAnthropic {
				overflow = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`
			}
			up := newScriptUpstream(t, func(n int, body string) reply {
				switch {
				case isSummarize(body):
					return reply{text: "Earlier: the user said hello twice."}
				case n == 2:
					return reply{status: http.StatusBadRequest, errBody: overflow}
				}
				return reply{text: "Hi."}
			})
			g := sessionGateway(t, up, provider, `
compaction: {after: 1000000, keepLast: 1}
`)
			for _, text := range []string{"Hello.", "Hello again.", "Long question?"} {
				if res := g.say("s1", text); res.Status != engine.StatusCompleted {
					t.Fatalf("turn %q: %+v", text, res)
				}
			}
			if !isSummarize(up.body(3)) {
				t.Fatalf("request 3 is not the summarize request: %s", up.body(3))
			}
			retried := up.body(4)
			if strings.Contains(retried, "Hello again.") || !strings.Contains(retried, "Earlier: the user said hello twice.") || !strings.Contains(retried, "Long question?") {
				t.Errorf("the retried step: %s", retried)
			}
			cs, err := g.store.Compactions(context.Background(), "default", "s1")
			if err != nil || len(cs) != 1 || cs[0].Reason != store.CompactOverflow || cs[0].MessageCount != 4 {
				t.Fatalf("compactions %+v, %v", cs, err)
			}
			if n := len(g.history("mem", "s1")); n != 6 {
				t.Errorf("history has %d messages, want all 6", n)
			}
		})
	}
}

// TestHTTPBlockFailure: an http block whose source fails uses its
// fallback, or fails the turn with an error naming the block (and not
// the source's URL).
func TestHTTPBlockFailure(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	up := newScriptUpstream(t, func(int, string) reply { return reply{text: "Hi."} })
	t.Run("fallback", func(t *testing.T) {
		g := sessionGateway(t, up, config.ProviderOpenAI, fmt.Sprintf(`
context:
  - {name: guidance, http: {url: %q, fallback: "Be careful today."}}
`, down.URL))
		if res := g.say("s1", "Hello."); res.Status != engine.StatusCompleted {
			t.Fatalf("turn %+v", res)
		}
		if body := up.body(-1); !strings.Contains(body, `## guidance\nBe careful today.`) {
			t.Errorf("the prompt lacks the fallback: %s", body)
		}
	})
	t.Run("error", func(t *testing.T) {
		g := sessionGateway(t, up, config.ProviderOpenAI, fmt.Sprintf(`
context:
  - {name: guidance, http: {url: %q}}
`, down.URL))
		calls := len(up.bodies)
		chunks := readUIStream(t, g.do("POST", "/v1/agents/mem/chat", chatBody("s2", "u1", "Hello.")))
		var errText string
		for _, c := range chunks {
			if c.str("type") == "error" {
				errText = c.str("errorText")
			}
		}
		if errText != `context block "guidance" is unavailable: its source failed and it has no fallback` {
			t.Errorf("error chunk %q (%s)", errText, strings.Join(types(chunks), ","))
		}
		if len(up.bodies) != calls {
			t.Error("the turn reached the model")
		}
		if h := g.history("mem", "s2"); len(h) != 1 || h[0].Role != engine.RoleUser {
			t.Errorf("history %+v, want the user message only", h)
		}
	})
}

// TestHistorySearch: the model searches its own session's stored messages
// with search_history (a tool of kind context) and gets the matching
// message back as the tool's output.
func TestHistorySearch(t *testing.T) {
	up := newScriptUpstream(t, func(n int, _ string) reply {
		if n == 1 {
			return reply{call: "search_history", args: `{"query":"Which city? Paris"}`}
		}
		return reply{text: "Noted."}
	})
	g := sessionGateway(t, up, config.ProviderOpenAI, `historySearch: true`)
	g.say("s1", "I live in Paris.")
	g.say("s1", "Where do I live?")
	if body := up.body(2); !strings.Contains(body, `\"snippet\":\"I live in [Paris].\"`) || !strings.Contains(body, `\"role\":\"user\"`) {
		t.Errorf("the tool output does not bring the first message back: %s", body)
	}
	if body := up.body(0); !strings.Contains(body, `"name":"search_history"`) {
		t.Errorf("search_history is not offered: %s", body)
	}
}

// TestSessionOnOpenAIEndpoint: a turn of the OpenAI-compatible endpoint
// has no stored session, so it gets the static blocks, the writable block
// shown empty, and neither the session tools nor a compaction.
func TestSessionOnOpenAIEndpoint(t *testing.T) {
	up := newScriptUpstream(t, func(int, string) reply { return reply{text: "Hi.", promptTokens: 99999} })
	g := sessionGateway(t, up, config.ProviderOpenAI, `
context:
  - {name: soul, text: You are terse.}
  - {name: memory, writable: true, maxTokens: 10}
compaction: {after: 10}
historySearch: true
`)
	for range 2 {
		g.doJSON("POST", "/v1/chat/completions", map[string]any{"model": "mem",
			"messages": []any{map[string]any{"role": "user", "content": "hello"}}}, http.StatusOK, nil)
	}
	body := up.body(-1)
	if !strings.Contains(body, `"## soul\nYou are terse.\n\n## memory\n(empty)"`) {
		t.Errorf("system prompt: %s", body)
	}
	if strings.Contains(body, "update_context") || strings.Contains(body, "search_history") || len(up.bodies) != 2 {
		t.Errorf("session tools offered or a compaction ran (%d requests): %s", len(up.bodies), body)
	}
}
