package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/internal/schema"
	"github.com/turngate/turngate/engine/tools/internal/toolname"
	"github.com/turngate/turngate/internal/childenv"
	"github.com/turngate/turngate/internal/sameorigin"
	"github.com/turngate/turngate/internal/tracing"
)

// maxListedTools bounds how many tools one server may list; a server that
// lists more is misbehaving, and every tool costs prompt tokens.
const maxListedTools = 1000

// stdioTerminateWait is how long a stdio server gets to exit after its
// stdin is closed before it is sent SIGTERM (and later SIGKILL).
const stdioTerminateWait = 2 * time.Second

// implementation is how turngate introduces itself to MCP servers.
var implementation = &mcp.Implementation{Name: "turngate", Version: "1.0.0"}

// errUnavailable wraps the last connection error for calls made while a
// server is down and within the retry gap.
var errUnavailable = errors.New("server unavailable")

// server is one configured MCP server and its connection state.
type server struct {
	m   *Manager
	cfg ServerConfig

	// connMu serialises connection attempts.
	connMu sync.Mutex

	// mu guards the fields below.
	mu          sync.Mutex
	session     *mcp.ClientSession
	closed      bool
	retrying    bool
	lastErr     error
	lastAttempt time.Time
	// listed holds every tool the server listed, by its own name.
	listed map[string]engine.Tool
	// exposed holds the tools exposed to models, sorted by exposed name.
	exposed []engine.Tool
}

// current returns the live session, or nil.
func (s *server) current() *mcp.ClientSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session
}

// reconnect returns a live session. With failed nil it connects only if
// there is no session; with failed set it replaces that (broken) session,
// unless another goroutine already did. A lazy attempt within retryMin of a
// failed one returns that failure instead of connecting again.
func (s *server) reconnect(ctx context.Context, failed *mcp.ClientSession, lazy bool) (*mcp.ClientSession, error) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	cur, closed, lastErr, lastAttempt := s.session, s.closed, s.lastErr, s.lastAttempt
	if cur != nil && cur == failed {
		s.session = nil
	}
	s.mu.Unlock()
	switch {
	case closed:
		return nil, errors.New("manager closed")
	case cur != nil && cur != failed:
		return cur, nil
	case cur != nil:
		_ = cur.Close() // broken already; its error says nothing new
	case lazy && lastErr != nil && time.Since(lastAttempt) < s.m.retryMin:
		return nil, fmt.Errorf("%w: %w", errUnavailable, lastErr)
	}
	sess, err := s.connect(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastAttempt, s.lastErr = time.Now(), err
	if err != nil {
		return nil, err
	}
	if s.closed {
		_ = sess.Close()
		return nil, errors.New("manager closed")
	}
	s.session = sess
	s.spawn(func() { s.watch(sess) })
	return sess, nil
}

// spawn runs f in a goroutine the Manager's Close waits for, unless s is
// closed. The caller holds s.mu, so that the goroutine is counted before
// Close (which sets closed under s.mu) starts waiting.
func (s *server) spawn(f func()) {
	if s.closed {
		return
	}
	s.m.wg.Go(f)
}

// connect opens a session and discovers the server's tools.
func (s *server) connect(ctx context.Context) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, s.m.connectTimeout)
	defer cancel()
	client := mcp.NewClient(implementation, &mcp.ClientOptions{
		Logger:                 s.m.log.With("mcpServer", s.cfg.Name),
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { s.rediscoverAsync() },
	})
	sess, err := client.Connect(ctx, s.transport(), nil)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	if err := s.discover(ctx, sess); err != nil {
		_ = sess.Close()
		return nil, err
	}
	s.m.log.Info("mcp server connected", "mcpServer", s.cfg.Name, "tools", len(s.snapshot()))
	return sess, nil
}

// transport returns a fresh transport for one connection attempt.
func (s *server) transport() mcp.Transport {
	if s.cfg.Transport == TransportStdio {
		cmd := exec.Command(s.cfg.Command, s.cfg.Args...)
		cmd.Env = childenv.Env(s.cfg.Env)
		cmd.Stderr = &logWriter{log: s.m.log, server: s.cfg.Name}
		return &mcp.CommandTransport{Command: cmd, TerminateDuration: stdioTerminateWait}
	}
	// Redirects stay on the endpoint's origin, and the configured headers
	// go only to it: neither the session nor a secret header follows a
	// redirect to another host.
	client := sameorigin.Client(http.DefaultClient)
	if len(s.cfg.Headers) > 0 {
		client.Transport = &headerTransport{base: client.Transport, headers: s.cfg.Headers, origin: s.origin()}
	}
	return &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: tracing.Client(client)}
}

// origin is the origin of the server's URL (transport http); Validate
// has parsed it.
func (s *server) origin() string {
	u, err := url.Parse(s.cfg.URL)
	if err != nil {
		return ""
	}
	return sameorigin.Of(u)
}

// discover lists the session's tools and stores them.
func (s *server) discover(ctx context.Context, sess *mcp.ClientSession) error {
	var listed []*mcp.Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("listing tools: %w", err)
		}
		if len(listed) == maxListedTools {
			return fmt.Errorf("listing tools: more than %d tools", maxListedTools)
		}
		listed = append(listed, t)
	}
	byName, exposed := s.expose(listed)
	s.mu.Lock()
	s.listed, s.exposed = byName, exposed
	s.mu.Unlock()
	s.m.rebuild()
	return nil
}

// rediscoverAsync refreshes the tools after a tools/list_changed
// notification. It runs apart from the notification handler, which must
// not call back into the session.
func (s *server) rediscoverAsync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.session
	if sess == nil {
		return
	}
	s.spawn(func() {
		ctx, cancel := context.WithTimeout(s.m.ctx, s.m.connectTimeout)
		defer cancel()
		if err := s.discover(ctx, sess); err != nil {
			s.m.log.Warn("mcp tool rediscovery failed", "mcpServer", s.cfg.Name, "error", err)
		}
	})
}

// expose turns the listed tools into engine tools: every listed tool by
// its own name, and the exposed ones under their exposed names. Tools with
// an invalid input schema are skipped with a warning.
func (s *server) expose(listed []*mcp.Tool) (map[string]engine.Tool, []engine.Tool) {
	byName := make(map[string]engine.Tool, len(listed))
	for _, t := range listed {
		raw := json.RawMessage(`{"type":"object"}`)
		if t.InputSchema != nil {
			b, err := json.Marshal(t.InputSchema)
			if err != nil {
				s.m.log.Warn("mcp tool skipped: encoding its input schema failed", "mcpServer", s.cfg.Name, "tool", t.Name, "error", err)
				continue
			}
			raw = b
		}
		if err := schema.Check(raw); err != nil {
			s.m.log.Warn("mcp tool skipped: invalid input schema", "mcpServer", s.cfg.Name, "tool", t.Name, "error", err)
			continue
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		byName[t.Name] = engine.Tool{
			ToolInfo: engine.ToolInfo{
				Name:        t.Name,
				Description: desc,
				InputSchema: raw,
				Kind:        engine.ToolKindMCP,
				Server:      s.cfg.Name,
			},
			Executor:       s.m.Executor(s.cfg.Name, t.Name),
			Timeout:        s.cfg.Timeout,
			MaxOutputBytes: s.cfg.MaxOutputBytes,
		}
	}

	// mapping is exposed name → server tool name.
	mapping := map[string]string{}
	sel := s.cfg.Tools
	switch {
	case sel != nil && len(sel.Rename) > 0:
		mapping = sel.Rename
	case sel != nil:
		for _, name := range sel.Allow {
			mapping[toolname.Sanitize(s.cfg.prefix()+name)] = name
		}
	default:
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			exposed := toolname.Sanitize(s.cfg.prefix() + name)
			if prev, dup := mapping[exposed]; dup {
				s.m.log.Warn("mcp tool skipped: its exposed name is taken", "mcpServer", s.cfg.Name, "tool", name, "exposed", exposed, "by", prev)
				continue
			}
			mapping[exposed] = name
		}
	}
	var exposed []engine.Tool
	for name, serverName := range mapping {
		t, ok := byName[serverName]
		if !ok {
			s.m.log.Warn("mcp tool in the tools selection is not listed by the server", "mcpServer", s.cfg.Name, "tool", serverName)
			continue
		}
		t.Name = name
		exposed = append(exposed, t)
	}
	slices.SortFunc(exposed, func(a, b engine.Tool) int { return strings.Compare(a.Name, b.Name) })
	return byName, exposed
}

// snapshot returns the exposed tools.
func (s *server) snapshot() []engine.Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exposed
}

// call runs one tool call, reconnecting once if the connection is broken.
func (s *server) call(ctx context.Context, toolName string, input json.RawMessage) (*mcp.CallToolResult, error) {
	sess := s.current()
	if sess == nil {
		var err error
		if sess, err = s.reconnect(ctx, nil, true); err != nil {
			return nil, err
		}
	}
	res, err := sess.CallTool(ctx, callParams(toolName, input))
	if err == nil || !connectionError(ctx, err) {
		return res, err
	}
	s.m.log.Warn("mcp call failed on a broken connection; reconnecting", "mcpServer", s.cfg.Name, "tool", toolName, "error", err)
	sess, rerr := s.reconnect(ctx, sess, false)
	if rerr != nil {
		s.startRetry()
		return nil, fmt.Errorf("%w; reconnecting: %w", err, rerr)
	}
	return sess.CallTool(ctx, callParams(toolName, input))
}

// callParams builds fresh params for one attempt (the SDK annotates them).
func callParams(toolName string, input json.RawMessage) *mcp.CallToolParams {
	var args any = map[string]any{}
	if len(input) > 0 && string(input) != "null" {
		args = input
	}
	return &mcp.CallToolParams{Name: toolName, Arguments: args}
}

// connectionError reports whether err says the connection (not the tool
// or the request) failed: any error that is not a JSON-RPC error response
// from the server, while the caller's ctx is still live.
func connectionError(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var wire *jsonrpc.Error
	return !errors.As(err, &wire)
}

// watch waits for sess to end; a session that ends on its own (a crashed
// stdio server, a broken stream) is dropped and reconnected in the
// background.
func (s *server) watch(sess *mcp.ClientSession) {
	err := sess.Wait()
	s.mu.Lock()
	lost := s.session == sess && !s.closed
	if lost {
		s.session = nil
		s.lastErr = fmt.Errorf("connection lost: %v", err)
		s.lastAttempt = time.Time{}
	}
	s.mu.Unlock()
	if lost {
		s.m.log.Warn("mcp server connection lost; reconnecting", "mcpServer", s.cfg.Name, "error", err)
		s.startRetry()
	}
}

// startRetry starts the background reconnect loop unless it runs already.
func (s *server) startRetry() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retrying || s.closed {
		return
	}
	s.retrying = true
	s.spawn(s.retryLoop)
}

// retryLoop reconnects with exponential backoff until it succeeds or the
// Manager closes.
func (s *server) retryLoop() {
	delay := s.m.retryMin
	timer := time.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-s.m.ctx.Done():
			return
		case <-timer.C:
		}
		_, err := s.reconnect(s.m.ctx, nil, false)
		s.mu.Lock()
		if s.session != nil || s.closed {
			s.retrying = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.m.log.Debug("mcp server reconnect failed", "mcpServer", s.cfg.Name, "retryIn", delay, "error", err)
		delay = min(delay*2, s.m.retryMax)
		timer.Reset(delay)
	}
}

// close ends the session for good.
func (s *server) close() error {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	s.mu.Lock()
	sess := s.session
	s.session, s.closed = nil, true
	s.mu.Unlock()
	if sess == nil {
		return nil
	}
	return sess.Close()
}

// headerTransport adds configured headers to every request to the
// server's origin.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	origin  string
}

// RoundTrip adds the headers to a clone of req, when req goes to the
// server's origin, and sends it.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if sameorigin.Of(req.URL) == t.origin {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}
