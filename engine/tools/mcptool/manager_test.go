package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/mcptool"
)

// serverEnv makes the test binary run the test MCP server on stdio
// instead of the tests (the TestMain re-exec pattern).
const serverEnv = "TURNGATE_MCPTOOL_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverEnv) != "" {
		if err := newTestServer("stdio").Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test mcp server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}

type sumIn struct {
	A int `json:"a"`
	B int `json:"b"`
}

type sumOut struct {
	Sum int `json:"sum"`
}

// newTestServer builds a real MCP server with the SDK. version is reported
// by the "version" tool, so tests can tell restarted servers apart; a
// server of version "v2" also has a "added" tool.
func newTestServer(version string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "greet", Description: "Greets someone."},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sum", Description: "Adds two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in sumIn) (*mcp.CallToolResult, sumOut, error) {
			return nil, sumOut{Sum: in.A + in.B}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("the disk is on fire")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "multi", Description: "Returns two contents."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "first"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1, 2}},
			}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "version", Description: "Reports the server's version and pid."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, map[string]any{"version": version, "pid": os.Getpid()}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fs.read", Description: "A dotted name."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "read"}}}, nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "broken", Description: "Has an invalid schema.", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"x": map[string]any{"type": "nonsense"}},
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	if version == "v2" {
		mcp.AddTool(s, &mcp.Tool{Name: "added", Description: "Only in v2."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "new"}}}, nil, nil
			})
	}
	return s
}

// httpServer is a test MCP server over streamable HTTP that can be
// stopped and started again on the same address.
type httpServer struct {
	t    *testing.T
	addr string
	srv  *httptest.Server
}

func startHTTPServer(t *testing.T, version string) *httpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &httpServer{t: t, addr: l.Addr().String()}
	h.start(l, version)
	t.Cleanup(h.stop)
	return h
}

func (h *httpServer) start(l net.Listener, version string) {
	mcpServer := newTestServer(version)
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil)
	h.srv = httptest.NewUnstartedServer(handler)
	h.srv.Listener.Close()
	h.srv.Listener = l
	h.srv.Start()
}

func (h *httpServer) url() string { return "http://" + h.addr + "/mcp" }

// stop closes the server and every connection to it (the client's
// standalone SSE stream included).
func (h *httpServer) stop() {
	if h.srv == nil {
		return
	}
	h.srv.CloseClientConnections()
	h.srv.Close()
	h.srv = nil
}

// restart stops the server and starts a new one (a new MCP server, so no
// session survives) on the same address.
func (h *httpServer) restart(version string) {
	h.t.Helper()
	h.stop()
	l, err := net.Listen("tcp", h.addr)
	if err != nil {
		h.t.Fatalf("listening again on %s: %v", h.addr, err)
	}
	h.start(l, version)
}

func newManager(t *testing.T, cfgs ...mcptool.ServerConfig) *mcptool.Manager {
	t.Helper()
	m, err := mcptool.NewManager(cfgs,
		mcptool.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		mcptool.WithRetryBackoff(10*time.Millisecond, 100*time.Millisecond),
		mcptool.WithConnectTimeout(10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func stdioConfig(t *testing.T, name string) mcptool.ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return mcptool.ServerConfig{Name: name, Transport: mcptool.TransportStdio, Command: exe, Env: map[string]string{serverEnv: "1"}}
}

func names(tools []engine.Tool) []string {
	var s []string
	for _, t := range tools {
		s = append(s, t.Name)
	}
	return s
}

func find(t *testing.T, tools []engine.Tool, name string) engine.Tool {
	t.Helper()
	for _, tool := range tools {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q in %v", name, names(tools))
	return engine.Tool{}
}

func execute(t *testing.T, tool engine.Tool, input string) (string, error) {
	t.Helper()
	out, err := tool.Executor.Execute(context.Background(), engine.ToolExecution{ToolName: tool.Name, Input: json.RawMessage(input)})
	return string(out), err
}

// eventually polls cond until it holds; the test's own timeout bounds it.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if t.Context().Err() != nil {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// transports runs f against the test server over both transports.
func transports(t *testing.T, f func(t *testing.T, cfg mcptool.ServerConfig)) {
	t.Run("http", func(t *testing.T) {
		t.Parallel()
		srv := startHTTPServer(t, "v1")
		f(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.url()})
	})
	t.Run("stdio", func(t *testing.T) {
		t.Parallel()
		f(t, stdioConfig(t, "test"))
	})
}

func TestDiscovery(t *testing.T) {
	transports(t, func(t *testing.T, cfg mcptool.ServerConfig) {
		m := newManager(t, cfg)
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		tools := m.Tools()
		// "broken" has an invalid schema and is skipped; "fs.read" is
		// renamed to a name every model API accepts.
		want := []string{"test_fail", "test_fs_read", "test_greet", "test_multi", "test_sum", "test_version"}
		if got := names(tools); !slices.Equal(got, want) {
			t.Fatalf("tools = %v, want %v", got, want)
		}
		greet := find(t, tools, "test_greet")
		if greet.Kind != engine.ToolKindMCP || greet.Server != "test" || greet.Description != "Greets someone." {
			t.Errorf("greet info = %+v", greet.ToolInfo)
		}
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(greet.InputSchema, &schema); err != nil {
			t.Fatal(err)
		}
		if schema.Type != "object" || schema.Properties["name"] == nil || !slices.Equal(schema.Required, []string{"name"}) {
			t.Errorf("greet schema = %s", greet.InputSchema)
		}
	})
}

func TestCall(t *testing.T) {
	transports(t, func(t *testing.T, cfg mcptool.ServerConfig) {
		m := newManager(t, cfg)
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		tools := m.Tools()
		tests := []struct {
			name    string
			tool    string
			input   string
			want    string
			wantErr string
		}{
			{name: "text content is a string", tool: "test_greet", input: `{"name":"Ada"}`, want: `"hello Ada"`},
			{name: "structured content is json", tool: "test_sum", input: `{"a":2,"b":3}`, want: `{"sum":5}`},
			{name: "several contents are an array", tool: "test_multi", input: `{}`, want: `["first",{"type":"image","mimeType":"image/png","data":"AQI="}]`},
			{name: "sanitized name calls the server's name", tool: "test_fs_read", input: `{}`, want: `"read"`},
			{name: "null input is an empty object", tool: "test_multi", input: `null`, want: `["first",{"type":"image","mimeType":"image/png","data":"AQI="}]`},
			{name: "error result is a tool error", tool: "test_fail", input: `{}`, wantErr: "mcp tool fail on server test: the disk is on fire"},
			{name: "invalid arguments are a tool error", tool: "test_greet", input: `{"name":7}`, wantErr: "mcp tool greet on server test: "},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, err := execute(t, find(t, tools, tt.tool), tt.input)
				if tt.wantErr != "" {
					if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
						t.Fatalf("error = %v, want prefix %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Errorf("output = %s, want %s", got, tt.want)
				}
			})
		}
	})
}

func TestCallUnknownToolOrServer(t *testing.T) {
	srv := startHTTPServer(t, "v1")
	m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.url()})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Call(context.Background(), "test", "nope", json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), `unknown tool "nope"`) {
		t.Errorf("unknown tool: error = %v", err)
	}
	if _, err := m.Call(context.Background(), "other", "greet", json.RawMessage(`{}`)); err == nil || err.Error() != `mcp tool greet: unknown mcp server "other"` {
		t.Errorf("unknown server: error = %v", err)
	}
}

func TestSelection(t *testing.T) {
	empty := ""
	web := "web-"
	tests := []struct {
		name string
		cfg  mcptool.ServerConfig
		want []string
	}{
		{name: "custom prefix", cfg: mcptool.ServerConfig{Prefix: &web}, want: []string{"web-fail", "web-fs_read", "web-greet", "web-multi", "web-sum", "web-version"}},
		{name: "no prefix", cfg: mcptool.ServerConfig{Prefix: &empty, Tools: &mcptool.ToolSelection{Allow: []string{"greet"}}}, want: []string{"greet"}},
		{name: "allow-list", cfg: mcptool.ServerConfig{Tools: &mcptool.ToolSelection{Allow: []string{"sum", "greet", "missing"}}}, want: []string{"test_greet", "test_sum"}},
		{name: "mapping ignores the prefix", cfg: mcptool.ServerConfig{Tools: &mcptool.ToolSelection{Rename: map[string]string{"hello": "greet", "add": "sum"}}}, want: []string{"add", "hello"}},
	}
	srv := startHTTPServer(t, "v1")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Name, cfg.Transport, cfg.URL = "test", mcptool.TransportHTTP, srv.url()
			m := newManager(t, cfg)
			if err := m.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := names(m.Tools()); !slices.Equal(got, tt.want) {
				t.Errorf("tools = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestServerToolIgnoresSelection(t *testing.T) {
	srv := startHTTPServer(t, "v1")
	m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.url(),
		Tools: &mcptool.ToolSelection{Allow: []string{"sum"}}})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tool, ok := m.ServerTool("test", "greet")
	if !ok {
		t.Fatal("greet not found")
	}
	if tool.Name != "greet" || tool.Server != "test" {
		t.Errorf("tool = %+v", tool.ToolInfo)
	}
	if out, err := execute(t, tool, `{"name":"Bo"}`); err != nil || out != `"hello Bo"` {
		t.Errorf("call = %s, %v", out, err)
	}
	if _, ok := m.ServerTool("test", "broken"); ok {
		t.Error("a tool with an invalid schema is offered")
	}
}

func TestHTTPServerRestartIsSurvived(t *testing.T) {
	srv := startHTTPServer(t, "v1")
	m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.url()})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	version := find(t, m.Tools(), "test_version")
	if out, err := execute(t, version, `{}`); err != nil || !strings.Contains(out, `"version":"v1"`) {
		t.Fatalf("before restart: %s, %v", out, err)
	}

	srv.restart("v2")

	out, err := execute(t, version, `{}`)
	if err != nil || !strings.Contains(out, `"version":"v2"`) {
		t.Fatalf("after restart: %s, %v", out, err)
	}
	// The restarted server's tools are rediscovered.
	eventually(t, "v2's tool is discovered", func() bool { return slices.Contains(names(m.Tools()), "test_added") })
	if out, err := execute(t, find(t, m.Tools(), "test_added"), `{}`); err != nil || out != `"new"` {
		t.Errorf("new tool: %s, %v", out, err)
	}
}

func TestStdioServerCrashIsSurvived(t *testing.T) {
	m := newManager(t, stdioConfig(t, "test"))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	version := find(t, m.Tools(), "test_version")
	pid := func() int {
		t.Helper()
		out, err := execute(t, version, `{}`)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ PID int }
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		return v.PID
	}
	first := pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The next call succeeds on a new process, whether the crash was
	// noticed first by the session watcher or by the call itself.
	if out, err := execute(t, find(t, m.Tools(), "test_greet"), `{"name":"again"}`); err != nil || out != `"hello again"` {
		t.Fatalf("after crash: %s, %v", out, err)
	}
	if second := pid(); second == first {
		t.Errorf("pid after crash = %d, the killed one", second)
	}
}

func TestStartWithServerDownRetriesInBackground(t *testing.T) {
	srv := startHTTPServer(t, "v1")
	srv.stop()
	m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.url()})
	err := m.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "connecting") {
		t.Fatalf("Start error = %v, want a connection error", err)
	}
	if got := m.Tools(); len(got) != 0 {
		t.Fatalf("tools while down = %v", names(got))
	}
	if _, err := m.Call(context.Background(), "test", "greet", json.RawMessage(`{"name":"x"}`)); err == nil {
		t.Fatal("call to a down server succeeded")
	}

	srv.restart("v1")

	eventually(t, "tools discovered after the server came up", func() bool { return len(m.Tools()) > 0 })
	if out, err := execute(t, find(t, m.Tools(), "test_greet"), `{"name":"late"}`); err != nil || out != `"hello late"` {
		t.Errorf("call: %s, %v", out, err)
	}
}

func TestCallHonoursContext(t *testing.T) {
	srv := startHTTPServer(t, "v1")
	m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.url()})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Call(ctx, "test", "greet", json.RawMessage(`{"name":"x"}`)); !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestNewManagerRejectsBadConfig(t *testing.T) {
	bad := "has space"
	tests := []struct {
		name    string
		cfgs    []mcptool.ServerConfig
		wantErr string
	}{
		{name: "no transport", cfgs: []mcptool.ServerConfig{{Name: "a"}}, wantErr: `mcp server 0 ("a"): transport "": must be "http" or "stdio"`},
		{name: "http without url", cfgs: []mcptool.ServerConfig{{Name: "a", Transport: "http"}}, wantErr: `mcp server 0 ("a"): url: must be an http or https URL with a host`},
		{name: "stdio without command", cfgs: []mcptool.ServerConfig{{Name: "a", Transport: "stdio"}}, wantErr: `mcp server 0 ("a"): command: required for transport stdio`},
		{name: "http with command", cfgs: []mcptool.ServerConfig{{Name: "a", Transport: "http", URL: "http://h", Command: "x"}}, wantErr: `mcp server 0 ("a"): command, args and env are for transport stdio`},
		{name: "bad name", cfgs: []mcptool.ServerConfig{{Name: "a b", Transport: "stdio", Command: "x"}}, wantErr: `mcp server 0 ("a b"): name: tool name "a b": only letters, digits, '_' and '-' are allowed`},
		{name: "bad prefix", cfgs: []mcptool.ServerConfig{{Name: "a", Transport: "stdio", Command: "x", Prefix: &bad}}, wantErr: `mcp server 0 ("a"): prefix "has space": only letters, digits, '_' and '-' are allowed`},
		{name: "empty selection", cfgs: []mcptool.ServerConfig{{Name: "a", Transport: "stdio", Command: "x", Tools: &mcptool.ToolSelection{}}}, wantErr: `mcp server 0 ("a"): tools: an empty selection exposes nothing; remove it to expose every tool`},
		{name: "duplicate", cfgs: []mcptool.ServerConfig{{Name: "a", Transport: "stdio", Command: "x"}, {Name: "a", Transport: "stdio", Command: "y"}}, wantErr: `mcp server 1 ("a"): duplicate name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mcptool.NewManager(tt.cfgs)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestConcurrentCallsAcrossRestart(t *testing.T) {
	srv := startHTTPServer(t, "v1")
	m := newManager(t, mcptool.ServerConfig{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.url()})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.restart("v2")
	const calls = 16
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			out, err := m.Call(context.Background(), "test", "greet", json.RawMessage(fmt.Sprintf(`{"name":"n%d"}`, i)))
			if err == nil && string(out) != fmt.Sprintf(`"hello n%d"`, i) {
				err = fmt.Errorf("call %d: output %s", i, out)
			}
			errs <- err
		}()
		_ = m.Tools() // readers race with the reconnect's rediscovery
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func BenchmarkCallHTTP(b *testing.B) {
	mcpServer := newTestServer("v1")
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return mcpServer }, nil))
	defer func() {
		srv.CloseClientConnections()
		srv.Close()
	}()
	m, err := mcptool.NewManager([]mcptool.ServerConfig{{Name: "test", Transport: mcptool.TransportHTTP, URL: srv.URL}},
		mcptool.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	input := json.RawMessage(`{"name":"bench"}`)
	for b.Loop() {
		if _, err := m.Call(context.Background(), "test", "greet", input); err != nil {
			b.Fatal(err)
		}
	}
}
