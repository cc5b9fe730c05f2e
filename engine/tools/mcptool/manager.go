// Package mcptool exposes the tools of MCP servers (streamable HTTP or
// stdio, through the official MCP Go SDK) as engine tools. A Manager
// connects to every configured server, discovers its tools with their
// input schemas, exposes them under a prefix or an explicit mapping, runs
// calls, and reconnects to servers that crash or restart.
package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turngate/turngate/engine"
)

// Defaults for the Manager's options.
const (
	// DefaultConnectTimeout bounds one connection attempt, handshake and
	// tool discovery included.
	DefaultConnectTimeout = 30 * time.Second
	// DefaultRetryMin is the first delay of the background reconnect
	// backoff, and the shortest gap between two connection attempts made on
	// behalf of calls: a burst of calls to a dead server fails fast instead
	// of each trying to connect.
	DefaultRetryMin = 500 * time.Millisecond
	// DefaultRetryMax caps the background reconnect backoff.
	DefaultRetryMax = 30 * time.Second
)

// Option configures a Manager.
type Option func(*Manager)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(m *Manager) { m.log = l } }

// WithConnectTimeout bounds one connection attempt (default DefaultConnectTimeout).
func WithConnectTimeout(d time.Duration) Option { return func(m *Manager) { m.connectTimeout = d } }

// WithRetryBackoff sets the reconnect backoff bounds (defaults
// DefaultRetryMin and DefaultRetryMax).
func WithRetryBackoff(min, max time.Duration) Option {
	return func(m *Manager) { m.retryMin, m.retryMax = min, max }
}

// Manager owns the connections to the configured MCP servers. It is safe
// for concurrent use.
type Manager struct {
	log            *slog.Logger
	connectTimeout time.Duration
	retryMin       time.Duration
	retryMax       time.Duration

	servers []*server // in config order
	byName  map[string]*server

	// tools is the current exposed tool list, rebuilt whenever a server's
	// tools are (re)discovered; readers never lock.
	tools     atomic.Pointer[[]engine.Tool]
	rebuildMu sync.Mutex

	// ctx is cancelled by Close; it bounds background reconnects.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewManager checks the server configs and returns a Manager for them. It
// does not connect; call Start.
func NewManager(configs []ServerConfig, opts ...Option) (*Manager, error) {
	m := &Manager{
		log:            slog.Default(),
		connectTimeout: DefaultConnectTimeout,
		retryMin:       DefaultRetryMin,
		retryMax:       DefaultRetryMax,
		byName:         make(map[string]*server, len(configs)),
	}
	for _, o := range opts {
		o(m)
	}
	if m.retryMin <= 0 {
		m.retryMin = DefaultRetryMin
	}
	m.retryMax = max(m.retryMax, m.retryMin)
	var errs []error
	for i, cfg := range configs {
		if err := cfg.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("mcp server %d (%q): %w", i, cfg.Name, err))
			continue
		}
		if _, dup := m.byName[cfg.Name]; dup {
			errs = append(errs, fmt.Errorf("mcp server %d (%q): duplicate name", i, cfg.Name))
			continue
		}
		s := &server{m: m, cfg: cfg}
		m.servers = append(m.servers, s)
		m.byName[cfg.Name] = s
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.tools.Store(&[]engine.Tool{})
	return m, nil
}

// Start connects to every server concurrently and discovers its tools. It
// returns the servers' connection errors, joined; the Manager stays usable
// either way and keeps retrying failed servers in the background (with
// backoff), so a gateway may log the error and serve the other servers'
// tools. ctx bounds the initial attempts only. Each error names its server.
func (m *Manager) Start(ctx context.Context) error {
	errs := make([]error, len(m.servers))
	var wg sync.WaitGroup
	for i, s := range m.servers {
		wg.Go(func() {
			if _, err := s.reconnect(ctx, nil, false); err != nil {
				errs[i] = fmt.Errorf("mcp server %q: %w", s.cfg.Name, err)
				s.startRetry()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Tools returns the current exposed tools of all servers, in config order
// and by name within a server. A name exposed by two servers goes to the
// first. Tools of a server that is down stay listed (calls to them fail
// until it is back); rediscovery on reconnect replaces them.
func (m *Manager) Tools() []engine.Tool {
	return slices.Clone(*m.tools.Load())
}

// HasServer reports whether server is configured.
func (m *Manager) HasServer(server string) bool {
	_, ok := m.byName[server]
	return ok
}

// ServerTool returns the tool that server lists under toolName (its own
// name, not the exposed one) with an Executor calling it, whether or not
// the tool is exposed. The second result is false when the server is
// unknown or has not listed such a tool (yet).
func (m *Manager) ServerTool(server, toolName string) (engine.Tool, bool) {
	s, ok := m.byName[server]
	if !ok {
		return engine.Tool{}, false
	}
	s.mu.Lock()
	t, ok := s.listed[toolName]
	s.mu.Unlock()
	return t, ok
}

// Executor returns an Executor that calls toolName (the server's own name)
// on server.
func (m *Manager) Executor(server, toolName string) engine.Executor {
	return engine.ExecutorFunc(func(ctx context.Context, call engine.ToolExecution) (json.RawMessage, error) {
		return m.Call(ctx, server, toolName, call.Input)
	})
}

// Call calls toolName (the server's own name) on server with input (a JSON
// object) and maps the result: text content becomes a JSON string,
// structured content its JSON, several contents an array; an error result
// (isError) becomes an error carrying the result's text. A call that fails
// on a broken connection reconnects once and is retried.
func (m *Manager) Call(ctx context.Context, server, toolName string, input json.RawMessage) (json.RawMessage, error) {
	s, ok := m.byName[server]
	if !ok {
		return nil, fmt.Errorf("mcp tool %s: unknown mcp server %q", toolName, server)
	}
	res, err := s.call(ctx, toolName, input)
	if err != nil {
		return nil, fmt.Errorf("mcp tool %s on server %s: %w", toolName, server, err)
	}
	out, err := output(res)
	if err != nil {
		return nil, fmt.Errorf("mcp tool %s on server %s: %w", toolName, server, err)
	}
	return out, nil
}

// Close ends every session (stdio servers are asked to exit, then
// terminated) and stops background reconnects. It is idempotent.
func (m *Manager) Close() error {
	m.cancel()
	var errs []error
	for _, s := range m.servers {
		if err := s.close(); err != nil {
			errs = append(errs, fmt.Errorf("mcp server %s: closing: %w", s.cfg.Name, err))
		}
	}
	m.wg.Wait()
	return errors.Join(errs...)
}

// rebuild recomputes the exposed tool list from every server's tools.
func (m *Manager) rebuild() {
	m.rebuildMu.Lock()
	defer m.rebuildMu.Unlock()
	var all []engine.Tool
	owner := map[string]string{}
	for _, s := range m.servers {
		s.mu.Lock()
		exposed := s.exposed
		s.mu.Unlock()
		for _, t := range exposed {
			if prev, dup := owner[t.Name]; dup {
				m.log.Warn("mcp tool name exposed by two servers; keeping the first",
					"tool", t.Name, "server", s.cfg.Name, "kept", prev)
				continue
			}
			owner[t.Name] = s.cfg.Name
			all = append(all, t)
		}
	}
	m.tools.Store(&all)
}
