package tools_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/scripted"
	"github.com/turngate/turngate/engine/tools"
	"github.com/turngate/turngate/engine/tools/httptool"
	"github.com/turngate/turngate/engine/tools/mcptool"
)

type oneModel struct{ p engine.Provider }

func (m oneModel) Resolve(name string) (engine.Provider, string, error) { return m.p, name, nil }

// blockSecrets is the agent's rule: no reading of secret paths.
type blockSecrets struct{ engine.NopHooks }

func (blockSecrets) BeforeToolCall(_ context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	if tc.Tool.Kind == engine.ToolKindMCP && strings.Contains(string(tc.Input), "secret") {
		return &engine.ToolCallDecision{Action: engine.ActionBlock, Reason: "secrets stay secret"}, nil
	}
	return nil, nil
}

// TestToolsOnTheEngine runs turns of a real engine (scripted model) with
// tools built from config, against a real HTTP tool server and a real MCP
// server, and checks what ran and what the model saw.
func TestToolsOnTheEngine(t *testing.T) {
	var httpCalls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/weather", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, r.Body)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a hung-up client only once the body is read
		<-r.Context().Done()
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, strings.Repeat("cloudy ", 10_000))
	})
	httpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpCalls.Add(1)
		mux.ServeHTTP(w, r)
	}))
	defer httpSrv.Close()
	mcpURL, mcpCalls := startMCP(t)
	m := startManager(t, []mcptool.ServerConfig{{Name: "files", Transport: mcptool.TransportHTTP, URL: mcpURL}})

	citySchema := map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []any{"city"}, "additionalProperties": false,
	}
	built, err := tools.Build([]tools.Config{
		{Name: "weather", InputSchema: citySchema, HTTP: &httptool.Config{URL: httpSrv.URL + "/weather"}},
		{Name: "slow_weather", InputSchema: citySchema, Timeout: 50 * time.Millisecond, HTTP: &httptool.Config{URL: httpSrv.URL + "/slow"}},
		{Name: "big_weather", InputSchema: citySchema, MaxOutputBytes: 100, HTTP: &httptool.Config{URL: httpSrv.URL + "/big"}},
		{Name: "confirm", Client: &tools.ClientConfig{}},
	}, tools.Deps{MCP: m})
	if err != nil {
		t.Fatal(err)
	}
	agentTools := append(built, m.Tools()...)

	path := filepath.Join("testdata", "model.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	script, err := scripted.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(engine.Options{Models: oneModel{scripted.New(script)}, Logger: slog.New(slog.DiscardHandler)})

	tests := []struct {
		name      string
		prompt    string
		want      string // what the model saw: the output, or the error text
		wantError bool
		httpCalls int32
		mcpCalls  int32
	}{
		{name: "http tool", prompt: "weather Paris", want: `{"city":"Paris"}`, httpCalls: 1},
		{name: "invalid input never reaches the runner", prompt: "town Paris", wantError: true, want: "city"},
		{name: "slow tool times out", prompt: "slow Paris", wantError: true, want: "timed out after 50ms", httpCalls: 1},
		{name: "big output is truncated", prompt: "big Paris", want: "[truncated", httpCalls: 1},
		{name: "mcp tool", prompt: "read /etc/motd", want: `"contents of /etc/motd"`, mcpCalls: 1},
		{name: "blocked mcp call never reaches the server", prompt: "read /secret", wantError: false, want: "secrets stay secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			httpCalls.Store(0)
			mcpCalls.Store(0)
			res := eng.Run(context.Background(), &engine.TurnRequest{
				Identity: engine.Identity{RequestID: "r", SessionID: "s", Agent: "main", EntryPath: engine.EntryChat},
				Model:    "scripted",
				Messages: []engine.UIMessage{{ID: "u", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: tt.prompt}}}},
				Tools:    agentTools,
				Hooks:    blockSecrets{},
			})
			if res.Status != engine.StatusCompleted {
				t.Fatalf("status = %s (%s)", res.Status, res.Error)
			}
			results := res.Steps[0].ToolResults
			if len(results) != 1 {
				t.Fatalf("tool results = %+v", results)
			}
			r := results[0]
			seen := string(r.Output)
			if r.IsError {
				seen = r.ErrorText
			}
			if r.IsError != tt.wantError || !strings.Contains(seen, tt.want) {
				t.Errorf("model saw isError=%v %s, want isError=%v containing %s", r.IsError, seen, tt.wantError, tt.want)
			}
			if tt.name == "big output is truncated" && len(r.Output) > 200 {
				t.Errorf("truncated output is %d bytes", len(r.Output))
			}
			if got := httpCalls.Load(); got != tt.httpCalls {
				t.Errorf("http server calls = %d, want %d", got, tt.httpCalls)
			}
			if got := mcpCalls.Load(); got != tt.mcpCalls {
				t.Errorf("mcp server calls = %d, want %d", got, tt.mcpCalls)
			}
		})
	}

	t.Run("client tool is handed to the client", func(t *testing.T) {
		res := eng.Run(context.Background(), &engine.TurnRequest{
			Model:    "scripted",
			Messages: []engine.UIMessage{{ID: "u", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: "confirm really?"}}}},
			Tools:    agentTools,
		})
		if len(res.PendingToolCalls) != 1 || res.PendingToolCalls[0].ToolName != "confirm" {
			t.Errorf("pending = %+v (status %s)", res.PendingToolCalls, res.Status)
		}
	})
}
