// Package tools turns the tool declarations of the gateway's config into
// engine tools: HTTP endpoints (httptool), tools of MCP servers (mcptool),
// sub-agents (agenttool) and client-side tools. The runners only execute;
// the engine validates inputs against the schemas, applies beforeToolCall,
// timeouts, output limits and the concurrency cap.
//
// A tools config, decoded strictly from YAML by the gateway:
//
//	tools:
//	  - name: weather
//	    description: Current weather for a city.
//	    inputSchema:
//	      type: object
//	      properties: {city: {type: string}}
//	      required: [city]
//	    timeout: 10s
//	    maxOutputBytes: 8192
//	    http:
//	      url: https://tools.internal/weather
//	      headers: {Authorization: "Bearer ${WEATHER_TOKEN}"}
//	  - name: read_file
//	    mcp: {server: files, tool: read}
//	  - name: ask_researcher
//	    agent: {agent: researcher, maxDepth: 2}
//	  - name: confirm
//	    inputSchema: {type: object, properties: {question: {type: string}}}
//	    client: {}
//
// ${NAME} references in header values are expanded from the environment by
// the gateway's config loader before Build sees them.
package tools

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/agenttool"
	"github.com/turngate/turngate/engine/tools/httptool"
	"github.com/turngate/turngate/engine/tools/internal/schema"
	"github.com/turngate/turngate/engine/tools/internal/toolname"
	"github.com/turngate/turngate/engine/tools/mcptool"
)

// DefaultInputSchema is the input schema of an http or client tool that
// declares none: any JSON object.
var DefaultInputSchema = json.RawMessage(`{"type":"object"}`)

// bodyCapFactor sizes an http tool's response body cap from its
// MaxOutputBytes: the body is read a little past what the model will see,
// so that the engine's truncation (with its marker) still applies.
const bodyCapFactor = 4

// Config declares one tool (an entry of the `tools` config list). Exactly
// one of HTTP, MCP, Agent and Client is set.
type Config struct {
	// Name is what the model calls the tool: letters, digits, '_' and '-',
	// at most 64 characters.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// InputSchema is a JSON Schema (written as YAML) for the tool's input,
	// checked when the tool is built. Defaults: the server's schema for mcp
	// tools, {prompt: string} for agent tools, any object otherwise.
	InputSchema any `yaml:"inputSchema"`
	// Timeout bounds one execution, e.g. "30s" (zero: engine default).
	Timeout time.Duration `yaml:"timeout"`
	// MaxOutputBytes bounds the output the model sees (zero: engine default).
	MaxOutputBytes int `yaml:"maxOutputBytes"`

	HTTP   *httptool.Config  `yaml:"http"`
	MCP    *MCPConfig        `yaml:"mcp"`
	Agent  *agenttool.Config `yaml:"agent"`
	Client *ClientConfig     `yaml:"client"`
}

// MCPConfig declares a single tool of an MCP server under a name of the
// config's choosing (the `mcp:` block). Servers' tools are also exposed
// wholesale through the `mcpServers` list (mcptool.ServerConfig).
type MCPConfig struct {
	// Server names an entry of `mcpServers`.
	Server string `yaml:"server"`
	// Tool is the server's name for the tool (default: the tool's Name).
	Tool string `yaml:"tool"`
}

// ClientConfig marks a client-side tool (`client: {}`): the engine hands
// its calls to the client and the turn resumes with the client's result.
type ClientConfig struct{}

// Deps are what Build needs to build runners.
type Deps struct {
	// MCP resolves mcp tools; required if any tool has an mcp block. Start
	// it before Build so that tools can take the server's schema.
	MCP *mcptool.Manager
	// Agents runs sub-agents; required if any tool has an agent block.
	Agents agenttool.Runner
	// HTTPClient sends http tools' requests (default http.DefaultClient).
	HTTPClient *http.Client
}

// Build checks every tool config and returns the engine tools, in config
// order. It reports every problem at once, each naming its tool.
func Build(cfgs []Config, deps Deps) ([]engine.Tool, error) {
	var (
		out  []engine.Tool
		errs []error
		seen = make(map[string]bool, len(cfgs))
	)
	for i, cfg := range cfgs {
		label := fmt.Sprintf("tool %q", cfg.Name)
		if cfg.Name == "" {
			label = fmt.Sprintf("tool %d", i)
		}
		if seen[cfg.Name] && cfg.Name != "" {
			errs = append(errs, fmt.Errorf("%s: duplicate name", label))
			continue
		}
		seen[cfg.Name] = true
		t, toolErrs := build(cfg, deps)
		for _, err := range toolErrs {
			errs = append(errs, fmt.Errorf("%s: %w", label, err))
		}
		if len(toolErrs) == 0 {
			out = append(out, t)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// build builds one tool, or reports all its problems.
func build(cfg Config, deps Deps) (engine.Tool, []error) {
	var errs []error
	if err := toolname.Check(cfg.Name); err != nil {
		errs = append(errs, err)
	}
	if cfg.Timeout < 0 {
		errs = append(errs, errors.New("timeout: must not be negative"))
	}
	if cfg.MaxOutputBytes < 0 {
		errs = append(errs, errors.New("maxOutputBytes: must not be negative"))
	}
	var inputSchema json.RawMessage
	if cfg.InputSchema != nil {
		raw, err := json.Marshal(cfg.InputSchema)
		if err != nil {
			errs = append(errs, fmt.Errorf("inputSchema: encoding as JSON: %w", err))
		} else if err := schema.Check(raw); err != nil {
			errs = append(errs, fmt.Errorf("inputSchema: %w", err))
		}
		inputSchema = raw
	}
	var runners []string
	for _, r := range []struct {
		name string
		set  bool
	}{{"http", cfg.HTTP != nil}, {"mcp", cfg.MCP != nil}, {"agent", cfg.Agent != nil}, {"client", cfg.Client != nil}} {
		if r.set {
			runners = append(runners, r.name)
		}
	}
	switch len(runners) {
	case 0:
		errs = append(errs, errors.New("no runner: set one of http, mcp, agent or client"))
	case 1:
	default:
		errs = append(errs, fmt.Errorf("%s: set exactly one runner", strings.Join(runners, ", ")))
	}
	if len(errs) > 0 {
		return engine.Tool{}, errs
	}

	t := engine.Tool{
		ToolInfo:       engine.ToolInfo{Name: cfg.Name, Description: cfg.Description, InputSchema: inputSchema},
		Timeout:        cfg.Timeout,
		MaxOutputBytes: cfg.MaxOutputBytes,
	}
	var err error
	switch {
	case cfg.HTTP != nil:
		err = buildHTTP(&t, *cfg.HTTP, deps)
	case cfg.MCP != nil:
		err = buildMCP(&t, *cfg.MCP, deps)
	case cfg.Agent != nil:
		err = buildAgent(&t, *cfg.Agent, deps)
	case cfg.Client != nil:
		t.Kind = engine.ToolKindClient
		defaultSchema(&t, DefaultInputSchema)
	}
	if err != nil {
		return engine.Tool{}, []error{err}
	}
	return t, nil
}

func buildHTTP(t *engine.Tool, cfg httptool.Config, deps Deps) error {
	opts := []httptool.Option{}
	if deps.HTTPClient != nil {
		opts = append(opts, httptool.WithClient(deps.HTTPClient))
	}
	if t.MaxOutputBytes > 0 {
		opts = append(opts, httptool.WithMaxBodyBytes(int64(t.MaxOutputBytes)*bodyCapFactor))
	}
	ex, err := httptool.New(t.Name, cfg, opts...)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	t.Kind = engine.ToolKindHTTP
	t.Executor = ex
	defaultSchema(t, DefaultInputSchema)
	return nil
}

func buildMCP(t *engine.Tool, cfg MCPConfig, deps Deps) error {
	if cfg.Server == "" {
		return errors.New("mcp: server: required")
	}
	if deps.MCP == nil {
		return errors.New("mcp: no mcp servers are configured")
	}
	if !deps.MCP.HasServer(cfg.Server) {
		return fmt.Errorf("mcp: unknown mcp server %q", cfg.Server)
	}
	toolName := cfg.Tool
	if toolName == "" {
		toolName = t.Name
	}
	listed, ok := deps.MCP.ServerTool(cfg.Server, toolName)
	switch {
	case ok:
		if t.Description == "" {
			t.Description = listed.Description
		}
		defaultSchema(t, listed.InputSchema)
		t.Timeout = cmp.Or(t.Timeout, listed.Timeout)
		t.MaxOutputBytes = cmp.Or(t.MaxOutputBytes, listed.MaxOutputBytes)
	case t.InputSchema == nil:
		return fmt.Errorf("mcp: server %q has not listed a tool %q (is it connected?); declare inputSchema to build the tool without it", cfg.Server, toolName)
	}
	t.Kind = engine.ToolKindMCP
	t.Server = cfg.Server
	t.Executor = deps.MCP.Executor(cfg.Server, toolName)
	return nil
}

func buildAgent(t *engine.Tool, cfg agenttool.Config, deps Deps) error {
	ex, err := agenttool.New(cfg, deps.Agents)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	t.Kind = engine.ToolKindAgent
	t.Server = cfg.Agent
	t.Executor = ex
	if t.Description == "" {
		t.Description = fmt.Sprintf("Delegates a task to the %s agent and returns its answer.", cfg.Agent)
	}
	defaultSchema(t, agenttool.DefaultInputSchema)
	return nil
}

func defaultSchema(t *engine.Tool, def json.RawMessage) {
	if t.InputSchema == nil {
		t.InputSchema = def
	}
}
