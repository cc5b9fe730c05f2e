package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools"
	"github.com/turngate/turngate/engine/tools/agenttool"
	"github.com/turngate/turngate/engine/tools/mcptool"
	"github.com/turngate/turngate/internal/golden"
)

// file is the part of the gateway's config that declares tools.
type file struct {
	MCPServers []mcptool.ServerConfig `yaml:"mcpServers"`
	Tools      []tools.Config         `yaml:"tools"`
}

// decode decodes data strictly, as the gateway's loader does.
func decode(data []byte) (file, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(&f)
	return f, err
}

// load reads a testdata config, expanding ${NAME} from env first.
func load(t *testing.T, name string, env map[string]string) file {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := decode([]byte(os.Expand(string(data), func(k string) string { return env[k] })))
	if err != nil {
		t.Fatalf("decoding %s: %v", name, err)
	}
	return f
}

type readIn struct {
	Path string `json:"path" jsonschema:"the file to read"`
}

// startMCP serves a real MCP server with one tool, "read", over
// streamable HTTP. The counter counts the calls that reached the server.
func startMCP(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	calls := new(atomic.Int32)
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "v1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "Reads a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in readIn) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "contents of " + in.Path}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL, calls
}

func startManager(t *testing.T, cfgs []mcptool.ServerConfig) *mcptool.Manager {
	t.Helper()
	m, err := mcptool.NewManager(cfgs, mcptool.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

// researcher is the sub-agent runner: a fixed answer naming the prompt.
var researcher = agenttool.RunnerFunc(func(_ context.Context, req agenttool.Request) (json.RawMessage, error) {
	return json.Marshal(req.Agent + " says: " + agenttool.Prompt(req.Input))
})

func TestBuild(t *testing.T) {
	var gotAuth string
	httpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"weather":"sunny"}`))
	}))
	defer httpSrv.Close()
	mcpURL, _ := startMCP(t)
	f := load(t, "tools.yaml", map[string]string{"MCP_URL": mcpURL, "HTTP_URL": httpSrv.URL, "WEATHER_TOKEN": "s3cret"})
	m := startManager(t, f.MCPServers)

	built, err := tools.Build(f.Tools, tools.Deps{MCP: m, Agents: researcher})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]engine.Tool{}
	for _, tool := range built {
		byName[tool.Name] = tool
	}
	tests := []struct {
		name       string
		tool       string
		kind       string
		server     string
		schemaHas  string
		desc       string
		input      string
		wantOutput string
	}{
		{name: "http", tool: "weather", kind: engine.ToolKindHTTP, schemaHas: `"city"`, desc: "Current weather for a city.",
			input: `{"city":"Paris"}`, wantOutput: `{"weather":"sunny"}`},
		{name: "mcp takes the server's schema", tool: "read_file", kind: engine.ToolKindMCP, server: "files", schemaHas: `"path"`,
			desc: "Reads a file (our wording).", input: `{"path":"/etc/motd"}`, wantOutput: `"contents of /etc/motd"`},
		{name: "agent has the prompt schema", tool: "ask_researcher", kind: engine.ToolKindAgent, server: "researcher", schemaHas: `"prompt"`,
			desc: "Delegates a task to the researcher agent and returns its answer.", input: `{"prompt":"why?"}`, wantOutput: `"researcher says: why?"`},
		{name: "client has no executor", tool: "confirm", kind: engine.ToolKindClient, schemaHas: `"question"`, desc: "Asks the user to confirm."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, ok := byName[tt.tool]
			if !ok {
				t.Fatalf("no tool %q", tt.tool)
			}
			if tool.Kind != tt.kind || tool.Server != tt.server || tool.Description != tt.desc {
				t.Errorf("info = %+v", tool.ToolInfo)
			}
			if !strings.Contains(string(tool.InputSchema), tt.schemaHas) {
				t.Errorf("schema = %s, want it to mention %s", tool.InputSchema, tt.schemaHas)
			}
			if tt.kind == engine.ToolKindClient {
				if tool.Executor != nil {
					t.Error("client tool has an executor")
				}
				return
			}
			out, err := tool.Executor.Execute(context.Background(), engine.ToolExecution{ToolName: tool.Name, Input: json.RawMessage(tt.input)})
			if err != nil || string(out) != tt.wantOutput {
				t.Errorf("Execute = %s, %v; want %s", out, err, tt.wantOutput)
			}
		})
	}
	if gotAuth != "Bearer s3cret" {
		t.Errorf("Authorization = %q", gotAuth)
	}
	weather := byName["weather"]
	if weather.Timeout.String() != "10s" || weather.MaxOutputBytes != 8192 {
		t.Errorf("weather limits = %v, %d", weather.Timeout, weather.MaxOutputBytes)
	}
	// The manager exposes the server's allow-listed tools on its own.
	if got := m.Tools(); len(got) != 1 || got[0].Name != "files_read" {
		t.Errorf("manager tools = %+v", got)
	}
}

func TestBuildReportsEveryError(t *testing.T) {
	mcpURL, _ := startMCP(t)
	f := load(t, "invalid.yaml", map[string]string{"MCP_URL": mcpURL})
	m := startManager(t, f.MCPServers)
	_, err := tools.Build(f.Tools, tools.Deps{MCP: m})
	if err == nil {
		t.Fatal("no error")
	}
	path := filepath.Join("testdata", "invalid.golden")
	got := err.Error() + "\n"
	golden.Check(t, path, got)
}

func TestBuildWithoutDeps(t *testing.T) {
	cfgs := []tools.Config{
		{Name: "read", MCP: &tools.MCPConfig{Server: "files"}},
		{Name: "ask", Agent: &agenttool.Config{Agent: "researcher"}},
	}
	_, err := tools.Build(cfgs, tools.Deps{})
	want := "tool \"read\": mcp: no mcp servers are configured\ntool \"ask\": agent: no sub-agent runner configured"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestDecodeIsStrict(t *testing.T) {
	_, err := decode([]byte("tools:\n  - name: x\n    client: {}\n    timout: 3s\n"))
	if err == nil || !strings.Contains(err.Error(), "field timout not found") {
		t.Errorf("error = %v, want an unknown-field error", err)
	}
	_, err = decode([]byte("tools:\n  - name: x\n    client: {}\n    timeout: 30\n"))
	if err == nil {
		t.Error("a timeout without a unit was accepted")
	}
}

// FuzzBuild feeds arbitrary YAML through strict decoding and Build: bad
// config must be an error, never a panic.
func FuzzBuild(f *testing.F) {
	for _, name := range []string{"tools.yaml", "invalid.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("mcpServers:\n  - name: s\n    transport: stdio\n    command: x\n    tools: {a: b}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := decode(data)
		if err != nil {
			return
		}
		if _, err := mcptool.NewManager(cfg.MCPServers); err != nil {
			return
		}
		_, _ = tools.Build(cfg.Tools, tools.Deps{Agents: researcher})
	})
}
