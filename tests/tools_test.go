package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tool runners end to end: the gateway of testdata/tools/gateway runs
// http tools served by a toolServer, the tools of an MCP server over
// streamable HTTP (mcpFiles, in this process) and over stdio (the binary
// of testdata/tools/mcpserver), and sub-agents; the tests assert what the
// model saw (the scripted model's default answer repeats every tool result
// it was given), what reached the servers, and what the audit log says.

// toolsToken is the bearer token the lookup tool's config sends from the
// environment (${TURNGATE_TEST_HTTP_TOKEN}); the server refuses any other.
const toolsToken = "e2e-secret-token"

// brokenBody is the /broken endpoint's 500 body: backend internals that
// must reach neither the client nor the model.
const brokenBody = "pq: password authentication failed for user turngate at 10.0.3.7:5432"

// bigOutputBytes is the size of the big_lookup endpoint's answer, far
// beyond the tool's maxOutputBytes (200).
const bigOutputBytes = 10_000

// toolServer serves the fixture's http tools and records what reached it.
type toolServer struct {
	URL string

	mu sync.Mutex
	// bodies are the request bodies received, by path.
	bodies map[string][]string
	// inflight and maxInflight count the held calls running at once.
	inflight, maxInflight int
	// release lets the held calls answer once closed.
	release     chan struct{}
	releaseOnce sync.Once
}

// startToolServer serves a toolServer until the test ends.
func startToolServer(t *testing.T) *toolServer {
	t.Helper()
	ts := &toolServer{bodies: map[string][]string{}, release: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/lookup", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+toolsToken {
			http.Error(w, "missing or wrong token", http.StatusUnauthorized)
			return
		}
		var in struct {
			City string `json:"city"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "bad input", http.StatusBadRequest)
			return
		}
		writeJSON(w, map[string]any{"city": in.City, "temp": 21})
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers; the tool's timeout ends the call
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, brokenBody, http.StatusInternalServerError)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"report": strings.Repeat("x", bigOutputBytes)})
	})
	mux.HandleFunc("/note", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"noted": "yes"})
	})
	mux.HandleFunc("/held", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.inflight++
		ts.maxInflight = max(ts.maxInflight, ts.inflight)
		ts.mu.Unlock()
		select {
		case <-ts.release:
		case <-r.Context().Done():
		}
		// Counted out before answering: the engine can start the next call
		// only after this one's answer, so maxInflight is exact.
		ts.mu.Lock()
		ts.inflight--
		ts.mu.Unlock()
		writeJSON(w, map[string]string{"job": "done"})
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the body", http.StatusBadRequest)
			return
		}
		ts.mu.Lock()
		ts.bodies[r.URL.Path] = append(ts.bodies[r.URL.Path], string(body))
		ts.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		mux.ServeHTTP(w, r)
	}))
	ts.URL = srv.URL
	t.Cleanup(func() {
		ts.releaseHeld()
		srv.Close()
	})
	return ts
}

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// calls returns how many requests reached path.
func (ts *toolServer) calls(path string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.bodies[path])
}

// held returns the held calls running now and the most that ever ran at once.
func (ts *toolServer) held() (now, most int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.inflight, ts.maxInflight
}

// releaseHeld lets every held call, running or later, answer.
func (ts *toolServer) releaseHeld() { ts.releaseOnce.Do(func() { close(ts.release) }) }

// mcpFiles is the "files" MCP server, built with the MCP Go SDK and served
// over streamable HTTP; it can be restarted on the same address, as a
// redeployed server would be, and counts the calls that reached it.
type mcpFiles struct {
	t    *testing.T
	addr string
	srv  *httptest.Server

	mu sync.Mutex
	// instance numbers the server's starts; answers name it.
	instance int
	calls    map[string]int
}

// pathInput is the input of the files server's tools.
type pathInput struct {
	Path string `json:"path" jsonschema:"the file's path"`
}

// startMCPFiles serves an mcpFiles until the test ends.
func startMCPFiles(t *testing.T) *mcpFiles {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &mcpFiles{t: t, addr: l.Addr().String(), calls: map[string]int{}}
	m.serve(l)
	t.Cleanup(m.stop)
	return m
}

// URL is the server's streamable HTTP endpoint.
func (m *mcpFiles) URL() string { return "http://" + m.addr + "/mcp" }

// serve starts a new MCP server instance on l.
func (m *mcpFiles) serve(l net.Listener) {
	m.mu.Lock()
	m.instance++
	instance := m.instance
	m.mu.Unlock()
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-files", Version: fmt.Sprint(instance)}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "Reads a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathInput) (*mcp.CallToolResult, any, error) {
			m.count("read")
			return textResult(fmt.Sprintf("contents of %s from files #%d", in.Path, instance)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete", Description: "Deletes a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathInput) (*mcp.CallToolResult, any, error) {
			m.count("delete")
			return textResult("deleted " + in.Path), nil, nil
		})
	m.srv = httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	m.srv.Listener.Close()
	m.srv.Listener = l
	m.srv.Start()
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func (m *mcpFiles) count(tool string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[tool]++
}

// callsOf returns how many calls of tool reached any instance.
func (m *mcpFiles) callsOf(tool string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[tool]
}

// stop closes the server and every connection to it.
func (m *mcpFiles) stop() {
	if m.srv == nil {
		return
	}
	m.srv.CloseClientConnections()
	m.srv.Close()
	m.srv = nil
}

// restart stops the server and starts a new instance (no MCP session
// survives) on the same address.
func (m *mcpFiles) restart() {
	m.t.Helper()
	m.stop()
	l, err := net.Listen("tcp", m.addr)
	if err != nil {
		m.t.Fatalf("listening again on %s: %v", m.addr, err)
	}
	m.serve(l)
}

var (
	mcpServerOnce sync.Once
	mcpServerBin  string
	mcpServerErr  error
)

// stdioMCPServer builds testdata/tools/mcpserver once, next to the gateway
// binary, and returns its path.
func stdioMCPServer(t *testing.T) string {
	t.Helper()
	mcpServerOnce.Do(func() {
		bin := filepath.Join(filepath.Dir(binary), "mcpserver")
		build := exec.Command("go", "build", "-o", bin, "./tests/testdata/tools/mcpserver")
		build.Dir = repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			mcpServerErr = fmt.Errorf("building the stdio MCP server: %v\n%s", err, out)
			return
		}
		mcpServerBin = bin
	})
	if mcpServerErr != nil {
		t.Fatal(mcpServerErr)
	}
	return mcpServerBin
}

// toolsRun is a gateway on the tools fixture with the servers behind it.
type toolsRun struct {
	g     *gateway
	web   *toolServer
	files *mcpFiles
	// localLog is the stdio server's call log.
	localLog string
}

// startTools starts the servers and a gateway on testdata/tools/gateway.
func startTools(t *testing.T) *toolsRun {
	t.Helper()
	return startToolsOn(t, filepath.Join("tools", "gateway"))
}

// startToolsOn starts the servers and a gateway on the fixture
// testdata/<dir> (whose turngate.yaml reads the servers' addresses from
// the environment), with env added to the gateway's environment.
func startToolsOn(t *testing.T, dir string, env ...string) *toolsRun {
	t.Helper()
	x := &toolsRun{web: startToolServer(t), files: startMCPFiles(t), localLog: filepath.Join(t.TempDir(), "local-calls.log")}
	x.g = startGateway(t, gatewayOptions{
		Config: "turngate.yaml",
		Dir:    fixture(t, dir),
		Env: append([]string{
			"TURNGATE_TEST_HTTP_URL=" + x.web.URL,
			"TURNGATE_TEST_HTTP_TOKEN=" + toolsToken,
			"TURNGATE_TEST_MCP_URL=" + x.files.URL(),
			"TURNGATE_TEST_MCP_COMMAND=" + stdioMCPServer(t),
			"TURNGATE_TEST_MCP_LOG=" + x.localLog,
		}, env...),
	})
	// Runs before the gateway's stop: no turn is left waiting on a held call.
	t.Cleanup(x.web.releaseHeld)
	return x
}

// localCalls returns the calls that reached the stdio server, "<tool> <path>".
func (x *toolsRun) localCalls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(x.localLog)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.FieldsFunc(string(data), func(r rune) bool { return r == '\n' })
}

// outputString decodes a tool call's output as a JSON string.
func outputString(t *testing.T, tc *toolCall) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(tc.Output, &s); err != nil {
		t.Fatalf("%s output = %s, want a JSON string", tc.Name, tc.Output)
	}
	return s
}

// mustToolCall returns the stream's call of tool, in state want.
func mustToolCall(t *testing.T, s *uiStream, tool, want string) *toolCall {
	t.Helper()
	tc, ok := s.toolCall(tool)
	if !ok {
		t.Fatalf("no %s call in the stream:\n%s", tool, s)
	}
	if tc.State != want {
		t.Fatalf("%s call ended in %s, want %s:\n%s", tool, tc.State, want, s)
	}
	return tc
}

// decisionOf returns an audit record's decision object.
func decisionOf(rec map[string]any) map[string]any {
	d, _ := rec["decision"].(map[string]any)
	return d
}

// hookRecord matches a decision record of hook for tool whose session is
// session or, with sub set, one of its sub-agents' sessions.
func hookRecord(hook, session, tool string, sub bool) func(map[string]any) bool {
	return func(rec map[string]any) bool {
		id, _ := rec["sessionId"].(string)
		inSession := id == session || sub && strings.HasPrefix(id, session+":")
		return rec["hook"] == hook && rec["toolName"] == tool && inSession
	}
}

// TestMCPTools calls the tools of a real MCP server over streamable HTTP
// and over stdio: the allowed read runs and the model sees its output; the
// delete, blocked by a Rego rule on input.tool.kind and input.tool.server,
// never reaches the server, and its audit record names kind and server.
func TestMCPTools(t *testing.T) {
	x := startTools(t)
	for _, tt := range []struct {
		name, server string
		// calls returns the server's read and delete counts.
		calls func() (reads, deletes int)
	}{
		{name: "streamable http", server: "files", calls: func() (int, int) {
			return x.files.callsOf("read"), x.files.callsOf("delete")
		}},
		{name: "stdio", server: "local", calls: func() (reads, deletes int) {
			for _, c := range x.localCalls(t) {
				switch {
				case strings.HasPrefix(c, "read "):
					reads++
				case strings.HasPrefix(c, "delete "):
					deletes++
				}
			}
			return reads, deletes
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			session := "mcp-" + tt.server
			s := x.g.chat("mcp", userChat(session, "u1", tt.server+": read and delete /notes.txt", nil))
			read := mustToolCall(t, s, tt.server+"_read", "tool-output-available")
			if got, want := outputString(t, read), "contents of /notes.txt from "+tt.server; !strings.HasPrefix(got, want) {
				t.Errorf("read output = %q, want %q…", got, want)
			}
			del := mustToolCall(t, s, tt.server+"_delete", "tool-output-available")
			reason := fmt.Sprintf("mcp tool %s_delete of server %s may not delete", tt.server, tt.server)
			if got := outputString(t, del); got != reason {
				t.Errorf("delete output = %q, want the block reason %q", got, reason)
			}
			for _, saw := range []string{"The " + tt.server + "_read tool returned: contents of /notes.txt", "The " + tt.server + "_delete tool returned: " + reason} {
				if !strings.Contains(s.text(), saw) {
					t.Errorf("the model's answer %q does not show it saw %q", s.text(), saw)
				}
			}
			if reads, deletes := tt.calls(); reads != 1 || deletes != 0 {
				t.Errorf("the server got %d reads and %d deletes, want 1 and 0", reads, deletes)
			}
			rec := x.g.waitAudit("the blocked delete", toolDecision(session, tt.server+"_delete"))
			if d := decisionOf(rec); d["action"] != "block" || d["reason"] != reason {
				t.Errorf("audit decision = %v, want a block naming the kind and the server", rec["decision"])
			}
			if rec["toolKind"] != "mcp" || rec["toolServer"] != tt.server {
				t.Errorf("audit record names tool kind %v server %v, want mcp %s", rec["toolKind"], rec["toolServer"], tt.server)
			}
			allowed := x.g.waitAudit("the allowed read", toolDecision(session, tt.server+"_read"))
			if allowed["outcome"] != "no_match" {
				t.Errorf("read audit record = %v, want outcome no_match", allowed)
			}
		})
	}
}

// TestMCPServerRestart restarts the MCP server on the same address between
// two chats: the second chat's call reaches the new server.
func TestMCPServerRestart(t *testing.T) {
	x := startTools(t)
	first := x.g.chat("mcp", userChat("restart-1", "u1", "files: read /a.txt", nil))
	if got := outputString(t, mustToolCall(t, first, "files_read", "tool-output-available")); got != "contents of /a.txt from files #1" {
		t.Fatalf("first read = %q, want the first server's answer", got)
	}

	x.files.restart()

	second := x.g.chat("mcp", userChat("restart-2", "u1", "files: read /b.txt", nil))
	if got := outputString(t, mustToolCall(t, second, "files_read", "tool-output-available")); got != "contents of /b.txt from files #2" {
		t.Fatalf("read after the restart = %q, want the restarted server's answer", got)
	}
	if n := x.files.callsOf("read"); n != 2 {
		t.Errorf("the server instances got %d reads, want 2", n)
	}
}

// TestHTTPTools runs http tools through the gateway: the output, invalid
// input, a timeout, an oversized output and the cap on concurrent calls.
func TestHTTPTools(t *testing.T) {
	x := startTools(t)

	t.Run("output", func(t *testing.T) {
		s := x.g.chat("web", userChat("http-output", "u1", "lookup Paris", nil))
		tc := mustToolCall(t, s, "lookup", "tool-output-available")
		if got := string(tc.Output); got != `{"city":"Paris","temp":21}` {
			t.Errorf("lookup output = %s, want the endpoint's JSON (sent with the token from the environment)", got)
		}
		if saw := `The lookup tool returned: {"city":"Paris","temp":21}`; !strings.Contains(s.text(), saw) {
			t.Errorf("the model's answer %q does not show it saw %q", s.text(), saw)
		}
	})

	t.Run("invalid input never reaches the server", func(t *testing.T) {
		before := x.web.calls("/lookup")
		s := x.g.chat("web", userChat("http-invalid", "u1", "lookup without a city", nil))
		inputError, ok := s.first("tool-input-error")
		if !ok || inputError.str("toolName") != "lookup" || !strings.Contains(inputError.str("errorText"), "missing property 'city'") {
			t.Fatalf("no tool-input-error naming the schema violation:\n%s", s)
		}
		if !strings.Contains(s.text(), "The lookup tool failed: Invalid input") {
			t.Errorf("the model's answer %q does not show it saw the input error", s.text())
		}
		if n := x.web.calls("/lookup") - before; n != 0 {
			t.Errorf("the invalid call reached the server %d times", n)
		}
	})

	t.Run("slow tool times out", func(t *testing.T) {
		s := x.g.chat("web", userChat("http-slow", "u1", "slowly lookup Oslo", nil))
		tc := mustToolCall(t, s, "slow_lookup", "tool-output-error")
		want := `tool "slow_lookup" timed out after 300ms`
		if tc.ErrorText != want {
			t.Errorf("error = %q, want %q", tc.ErrorText, want)
		}
		if saw := "The slow_lookup tool failed: " + want; !strings.Contains(s.text(), saw) {
			t.Errorf("the model's answer %q does not show it saw %q", s.text(), saw)
		}
		if s.finishReason() != "stop" {
			t.Errorf("finishReason = %q, want stop: a tool timeout is the model's to handle", s.finishReason())
		}
	})

	// The review's probe (issue 28 finding 8): a backend's error body and
	// a transport error reach neither the client nor the model, which see
	// a generic text; the audit record keeps the detail.
	t.Run("backend internals stay in the audit log", func(t *testing.T) {
		for _, tt := range []struct{ session, prompt, tool, detail string }{
			{"http-broken", "brokenly lookup Oslo", "broken_lookup", "status 500: " + brokenBody},
			{"http-down", "lookup Oslo on a backend that is down", "down_lookup", "connection refused"},
		} {
			s := x.g.chat("web", userChat(tt.session, "u1", tt.prompt, nil))
			tc := mustToolCall(t, s, tt.tool, "tool-output-error")
			want := fmt.Sprintf("Tool %q failed.", tt.tool)
			if tc.ErrorText != want {
				t.Errorf("%s: errorText = %q, want %q", tt.tool, tc.ErrorText, want)
			}
			if saw := "The " + tt.tool + " tool failed: " + want; !strings.Contains(s.text(), saw) {
				t.Errorf("%s: the model's answer %q does not show it saw %q", tt.tool, s.text(), saw)
			}
			for _, leak := range []string{"10.0.3.7", "pq:", "127.0.0.1:1", "connection refused", "dial tcp"} {
				if strings.Contains(s.String(), leak) {
					t.Errorf("%s: the stream shows %q:\n%s", tt.tool, leak, s)
				}
			}
			rec := x.g.waitAudit("the failed "+tt.tool, func(rec map[string]any) bool {
				return rec["kind"] == "afterToolCall" && rec["sessionId"] == tt.session && rec["toolName"] == tt.tool
			})
			if e, _ := rec["error"].(string); !strings.Contains(e, tt.detail) {
				t.Errorf("%s: audit error %q, want the detail %q", tt.tool, e, tt.detail)
			}
		}
	})

	t.Run("oversized output is truncated", func(t *testing.T) {
		s := x.g.chat("web", userChat("http-big", "u1", "lookup everything about Rome", nil))
		out := outputString(t, mustToolCall(t, s, "big_lookup", "tool-output-available"))
		head, marker, ok := strings.Cut(out, "…[truncated ")
		if !ok || !strings.HasSuffix(marker, " bytes]") {
			t.Fatalf("output %q has no truncation marker", out)
		}
		if len(head) > 200 || !strings.Contains(head, `report`) || !strings.HasSuffix(head, "xxxxxxxxxx") {
			t.Errorf("output kept %d bytes (%q), want the answer's first bytes, at most maxOutputBytes (200)", len(head), head)
		}
		if !strings.Contains(s.text(), "[truncated ") {
			t.Errorf("the model's answer %q does not show it saw the marker", s.text())
		}
	})

	t.Run("concurrent calls are capped", func(t *testing.T) {
		r := x.g.openChat("web", userChat("http-held", "u1", "run ten jobs", nil))
		poll(t, "eight held calls run at once", func() error {
			if now, _ := x.web.held(); now < 8 {
				return fmt.Errorf("%d held calls running", now)
			}
			return nil
		})
		x.web.releaseHeld()
		s, err := r.finish()
		if err != nil {
			t.Fatalf("stream: %v\n%s", err, s)
		}
		if _, most := x.web.held(); most != 8 {
			t.Errorf("at most %d calls ran at once, want the engine's cap of 8", most)
		}
		done := 0
		for _, tc := range s.toolCalls() {
			if tc.Name == "held" && tc.State == "tool-output-available" {
				done++
			}
		}
		if done != 10 || x.web.calls("/held") != 10 {
			t.Errorf("%d of 10 calls finished (%d reached the server):\n%s", done, x.web.calls("/held"), s)
		}
	})
}

// TestSubAgents has agent a delegate to b, which delegates to c and tries
// to take a note that a rule forbids b (by input.agent, input.entryPath
// and input.depth): a's stream carries c's answer and the block reason,
// and the note never reaches its server.
func TestSubAgents(t *testing.T) {
	x := startTools(t)
	const session = "subagents-1"
	s := x.g.chat("a", userChat(session, "u1", "delegate the report", nil))
	reason := "agent b may not take notes (subAgent at depth 1)"
	out := outputString(t, mustToolCall(t, s, "ask_b", "tool-output-available"))
	for _, want := range []string{"The ask_c tool returned: C finished the report.", "The note tool returned: " + reason} {
		if !strings.Contains(out, want) {
			t.Errorf("b's answer %q lacks %q", out, want)
		}
		if !strings.Contains(s.text(), want) {
			t.Errorf("a's final text %q lacks %q", s.text(), want)
		}
	}
	if s.finishReason() != "stop" {
		t.Errorf("finishReason = %q, want stop", s.finishReason())
	}
	if n := x.web.calls("/note"); n != 0 {
		t.Errorf("b's blocked note reached the server %d times", n)
	}

	blocked := x.g.waitAudit("b's blocked note", hookRecord("beforeToolCall", session, "note", true))
	if blocked["agent"] != "b" || decisionOf(blocked)["action"] != "block" {
		t.Errorf("note audit record = %v, want agent b's block", blocked)
	}
	askC := x.g.waitAudit("b's call of c", hookRecord("beforeToolCall", session, "ask_c", true))
	if askC["agent"] != "b" || askC["outcome"] != "no_match" {
		t.Errorf("ask_c audit record = %v, want agent b's allowed call", askC)
	}

	// The rule is b's alone: a top-level turn takes its note.
	top := x.g.chat("a", userChat("subagents-2", "u1", "note buy milk", nil))
	mustToolCall(t, top, "note", "tool-output-available")
	if n := x.web.calls("/note"); n != 1 {
		t.Errorf("the top-level note reached the server %d times, want 1", n)
	}
}

// TestToolResultPolicyEveryKind has the tool_result rule redact outputs
// mentioning "classified" from an http tool, both MCP transports and a
// sub-agent: the model sees "[REDACTED]" each time.
func TestToolResultPolicyEveryKind(t *testing.T) {
	x := startTools(t)
	for _, tt := range []struct {
		name, agent, text, tool string
	}{
		{name: "http", agent: "web", text: "lookup classified", tool: "lookup"},
		{name: "mcp over streamable http", agent: "mcp", text: "files: read /classified", tool: "files_read"},
		{name: "mcp over stdio", agent: "mcp", text: "local: read /classified", tool: "local_read"},
		// c's answer to b is redacted; b relays the redaction to a.
		{name: "agent", agent: "a", text: "delegate classified work", tool: "ask_c"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			session := "result-" + strings.ReplaceAll(tt.name, " ", "-")
			s := x.g.chat(tt.agent, userChat(session, "u1", tt.text, nil))
			if strings.Contains(s.text(), "classified") {
				t.Errorf("the model saw the classified output: %q", s.text())
			}
			if saw := "The " + tt.tool + " tool returned: [REDACTED]"; !strings.Contains(s.text(), saw) {
				t.Errorf("the answer %q does not show the model saw %q", s.text(), saw)
			}
			rec := x.g.waitAudit("the toolResult decision", hookRecord("toolResult", session, tt.tool, true))
			if rec["outcome"] != "matched" {
				t.Errorf("toolResult audit record = %v, want outcome matched", rec)
			}
		})
	}
}
