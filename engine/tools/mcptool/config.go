package mcptool

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/engine/tools/internal/toolname"
	"github.com/turngate/turngate/internal/childenv"
)

// Transports an MCP server is reached over.
const (
	// TransportHTTP is MCP's streamable HTTP transport.
	TransportHTTP = "http"
	// TransportStdio runs the server as a child process speaking
	// newline-delimited JSON-RPC on stdin/stdout.
	TransportStdio = "stdio"
)

// ServerConfig is one entry of the `mcpServers` config list. Header and
// env values may reference environment variables as ${NAME}; the gateway's
// config loader expands them before the config reaches the Manager.
type ServerConfig struct {
	// Name identifies the server in tool names, rules (tool.server) and logs.
	Name string `yaml:"name"`
	// Transport is TransportHTTP or TransportStdio.
	Transport string `yaml:"transport"`
	// URL is the streamable HTTP endpoint (transport http).
	URL string `yaml:"url"`
	// Headers are sent with every HTTP request (transport http), e.g. an
	// Authorization header.
	Headers map[string]string `yaml:"headers"`
	// Command and Args start the server (transport stdio).
	Command string   `yaml:"command"`
	Args    []string `yaml:"args"`
	// Env is added to the child's environment (transport stdio). The child
	// inherits only PATH, HOME, USER, LOGNAME, SHELL, TERM, TMPDIR and LANG
	// from the gateway (childenv.Inherited), never its secrets.
	Env map[string]string `yaml:"env"`
	// Prefix is prepended to each exposed tool name; nil means "<name>_",
	// and an explicit "" exposes the server's names unchanged.
	Prefix *string `yaml:"prefix"`
	// Tools limits or renames the exposed tools; nil exposes every tool.
	Tools *ToolSelection `yaml:"tools"`
	// Timeout bounds each call to this server's tools (zero: engine default).
	Timeout time.Duration `yaml:"timeout"`
	// MaxOutputBytes bounds each output the model sees (zero: engine default).
	MaxOutputBytes int `yaml:"maxOutputBytes"`
}

// ToolSelection is a server's `tools:` entry, written either as a list of
// server tool names (an allow-list; each is exposed under the prefix) or as
// a mapping from exposed name to server tool name (an explicit mapping; the
// prefix is not applied):
//
//	tools: [search, fetch]
//	tools: {web_search: search, web_fetch: fetch}
type ToolSelection struct {
	// Allow lists the server tool names to expose under the prefix.
	Allow []string
	// Rename maps an exposed tool name to the server's tool name.
	Rename map[string]string
}

// UnmarshalYAML decodes a list into Allow and a mapping into Rename.
func (s *ToolSelection) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.SequenceNode:
		return n.Decode(&s.Allow)
	case yaml.MappingNode:
		return n.Decode(&s.Rename)
	default:
		return fmt.Errorf("line %d: tools must be a list of tool names or a mapping from exposed name to server tool name", n.Line)
	}
}

// prefix returns the configured prefix or the default "<name>_".
func (c *ServerConfig) prefix() string {
	if c.Prefix != nil {
		return *c.Prefix
	}
	return c.Name + "_"
}

// Validate reports every problem with c, joined, each message starting
// with the key it is about ("url: …"); NewManager refuses a config that
// has any.
func (c *ServerConfig) Validate() error {
	var errs []error
	if err := toolname.Check(c.Name); err != nil {
		errs = append(errs, fmt.Errorf("name: %w", err))
	}
	switch c.Transport {
	case TransportHTTP:
		u, err := url.Parse(c.URL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("url: %w", err))
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			errs = append(errs, errors.New("url: must be an http or https URL with a host"))
		}
		if c.Command != "" || len(c.Args) > 0 || len(c.Env) > 0 {
			errs = append(errs, errors.New("command, args and env are for transport stdio"))
		}
	case TransportStdio:
		if c.Command == "" {
			errs = append(errs, errors.New("command: required for transport stdio"))
		}
		if c.URL != "" || len(c.Headers) > 0 {
			errs = append(errs, errors.New("url and headers are for transport http"))
		}
		for _, k := range slices.Sorted(maps.Keys(c.Env)) {
			if err := childenv.CheckName(k); err != nil {
				errs = append(errs, fmt.Errorf("env: %w", err))
			}
		}
	default:
		errs = append(errs, fmt.Errorf("transport %q: must be %q or %q", c.Transport, TransportHTTP, TransportStdio))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("timeout: must not be negative"))
	}
	if c.MaxOutputBytes < 0 {
		errs = append(errs, errors.New("maxOutputBytes: must not be negative"))
	}
	if p := c.Prefix; p != nil && toolname.Sanitize(*p) != *p {
		errs = append(errs, fmt.Errorf("prefix %q: only letters, digits, '_' and '-' are allowed", *p))
	}
	if s := c.Tools; s != nil {
		if len(s.Allow) == 0 && len(s.Rename) == 0 {
			errs = append(errs, errors.New("tools: an empty selection exposes nothing; remove it to expose every tool"))
		}
		if slices.Contains(s.Allow, "") {
			errs = append(errs, errors.New("tools: empty tool name"))
		}
		for _, exposed := range slices.Sorted(maps.Keys(s.Rename)) {
			if err := toolname.Check(exposed); err != nil {
				errs = append(errs, fmt.Errorf("tools: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}
