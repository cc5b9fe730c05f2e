// Package gateway is turngate's HTTP face: it serves the AI SDK UI message
// stream chat protocol, the programmatic entry paths (saveMessages,
// submitMessages, continueLastTurn, cancel, history), an OpenAI-compatible
// chat completions endpoint and the admin API, and drives the engine with
// the live rule revision for every turn.
//
// The stored transcript is the source of truth: from a request the gateway
// takes only a new user message, an edit of an earlier user message, a
// regenerate, and outputs for the client tool calls it is waiting for.
//
// One turn runs per session at a time. A request for a session whose turn is
// running queues behind it; when MaxQueuedTurnsPerSession requests already
// wait, the gateway answers 429 too_many_queued_turns (with Retry-After).
// onChatResponse observers run after the assistant message is persisted
// and after the session's turn lock is released.
package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/mcptool"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/console"
	"github.com/turngate/turngate/gateway/decisions"
	"github.com/turngate/turngate/gateway/erasure"
	"github.com/turngate/turngate/gateway/extension"
	"github.com/turngate/turngate/gateway/httpguard"
	"github.com/turngate/turngate/gateway/killswitch"
	"github.com/turngate/turngate/gateway/liveconfig"
	"github.com/turngate/turngate/gateway/metrics"
	"github.com/turngate/turngate/gateway/notify"
	"github.com/turngate/turngate/gateway/quota"
	"github.com/turngate/turngate/gateway/rulestate"
	"github.com/turngate/turngate/gateway/sessionctx"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

func init() {
	// gin's debug mode prints every route at startup; the gateway logs
	// through slog instead.
	gin.SetMode(gin.ReleaseMode)
}

// Options are the gateway's dependencies, built and owned by the caller
// (cmd/turngate wires them explicitly).
type Options struct {
	// Config is the validated configuration (limits, agents, tools, auth);
	// ApplyConfig replaces its live parts.
	Config *config.Config
	// LiveConfig, if set, reloads Config from its file (cmd/turngate
	// builds it with ApplyConfig); GET /v1/admin/config serves its status.
	LiveConfig *liveconfig.Manager
	// NotifyRetryBase is the approval webhooks' first retry delay (zero:
	// notify.DefaultRetryBase); tests shorten it.
	NotifyRetryBase time.Duration
	// DecisionLinger is how long the decision writer waits for the rest
	// of a turn's records (zero: decisions.DefaultLinger); tests lengthen
	// it.
	DecisionLinger time.Duration
	// Engine runs turns. Required.
	Engine *engine.Engine
	// Store persists sessions. Required.
	Store store.Store
	// Rules serves the live rule revision. Required.
	Rules *ruleset.Manager
	// MCP serves the tools of the configured MCP servers; nil when none.
	// The caller starts and closes it.
	MCP *mcptool.Manager
	// Audit receives decision records, the observation hooks' records and
	// turn outcomes; nil discards them.
	Audit *audit.Log
	// Metrics receives the gateway's metrics; nil makes a private registry.
	Metrics *metrics.Metrics
	// AnthropicPing is how long a /v1/messages stream stays silent before
	// it gets a ping event (zero: anthropic.DefaultPingInterval); tests
	// shorten it.
	AnthropicPing time.Duration
	// Observer, if set, observes every turn after the rule hooks (its
	// decision hooks run too). Its OnChatResponse runs after the assistant
	// message is persisted and the turn lock released.
	Observer engine.Hooks
	// State reads and records the declared rule state (and the config's
	// limits built on it); nil makes one over Store on the wall clock.
	// Start runs its pruning until Shutdown.
	State *rulestate.Tracker
	// Now is the clock of the kill switches' expiries and of the state's
	// windows when State is nil; nil means time.Now (tests inject one).
	Now    func() time.Time
	Logger *slog.Logger
}

// agent is one configured agent, ready to run.
type agent struct {
	name   string
	model  string
	system string
	// toolNames are resolved per turn (MCP servers' tools can change).
	toolNames []string
	defaults  engine.TurnConfig
	// bodySchema validates the custom body of the agent's requests (nil:
	// any body).
	bodySchema *jsonschema.Schema
	// session applies the agent's session configuration; nil without one.
	session *sessionctx.Agent
	// files limits the file parts of the agent's user messages.
	files config.Attachments
}

// Server is the gateway. Create it with New, serve Handler, call Start to
// run the submission workers and Shutdown to stop.
type Server struct {
	// live is the configuration and what is built from its live parts
	// (liveconfig.LiveFields), swapped whole by ApplyConfig: a request or
	// a turn takes what it needs once (conf, agents, auth), so a turn
	// runs on the configuration it started with.
	live atomic.Pointer[liveState]
	// liveConfig reloads the configuration file; nil without one.
	liveConfig *liveconfig.Manager
	engine     *engine.Engine
	store      store.Store
	rules      *ruleset.Manager
	audit      *audit.Log
	metrics    *metrics.Metrics
	log        *slog.Logger
	// failures logs and throttles failed authentications.
	failures *httpguard.Failures
	// console serves /console and its sessions (auth.go takes its cookie).
	console       *console.Console
	locks         *sessionLocks
	recorder      policy.Recorder
	observers     engine.Hooks
	failurePolicy ruleset.FailurePolicy
	handler       http.Handler
	tools         map[string]engine.Tool
	mcp           *mcptool.Manager
	// persistChecked is the last revision warnPersistInputs looked at.
	persistChecked atomic.Pointer[ruleset.Revision]
	// notify tells the approval webhooks of approval events; Shutdown
	// stops it.
	notify *notify.Notifier
	// extensions run after the rules on every turn; Shutdown stops them.
	extensions *extension.Set
	// anthropicPing is Options.AnthropicPing (zero: the default).
	anthropicPing time.Duration
	// kill holds the kill switches (killswitch.go); stopKill stops their
	// polling.
	kill     *killswitch.Switches
	stopKill func()
	// quotas are the config's quotas (admission.go); nil without any.
	quotas *quota.Quotas
	// state reads the declared rule state into the hooks and records the
	// events it counts.
	state *rulestate.Tracker
	// pruning runs the state's pruning from Start until Shutdown.
	pruning sync.WaitGroup
	// decisions copies every hook's audit record into the store
	// (admin_decisions.go); nil when decisions.store is false.
	decisions *decisions.Writer
	// retention erases the idle sessions (nil: no retention configured).
	retention *erasure.Retention

	// baseCtx is every turn's parent; baseCancel aborts all turns.
	baseCtx    context.Context
	baseCancel context.CancelFunc
	// stopDecisions ends the decision writer, after Shutdown stored the
	// queued records.
	stopDecisions context.CancelFunc
	closing       atomic.Bool
	turns         sync.WaitGroup

	mu     sync.Mutex
	active map[string]*turn
	// started wakes the chat streams held for an approval (approvals_hold.go)
	// when a turn of their session starts; guarded by mu.
	started map[string]*turnWatch

	subs *submissions
	// ws tracks the WebSocket chat connections (ws.go).
	ws wsHub

	// rep coordinates the replicas of a shared store (PostgreSQL); nil on
	// SQLite. stopRep stops its listener.
	rep     *replicas
	stopRep func()
}

// New returns a Server for opts.
func New(opts Options) (*Server, error) {
	if opts.Config == nil || opts.Engine == nil || opts.Store == nil || opts.Rules == nil {
		return nil, errors.New("gateway: Config, Engine, Store and Rules are required")
	}
	s := &Server{
		liveConfig: opts.LiveConfig,
		engine:     opts.Engine,
		rules:      opts.Rules,
		audit:      opts.Audit,
		metrics:    opts.Metrics,
		log:        opts.Logger,
		active:     map[string]*turn{},
		started:    map[string]*turnWatch{},
		mcp:        opts.MCP,
		state:      opts.State,

		anthropicPing: opts.AnthropicPing,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.live.Store(&liveState{cfg: opts.Config}) // auth and agents below
	s.locks = newSessionLocks(func() int { return s.conf().Limits.MaxQueuedTurnsPerSession })
	if s.state == nil {
		s.state = rulestate.New(opts.Store, rulestate.Options{Logger: s.log, Now: opts.Now})
	}
	if s.audit == nil {
		s.audit = audit.New(discard{}, nil, s.log)
	}
	if s.metrics == nil {
		s.metrics = metrics.New()
	}
	s.store = s.boundStore(opts.Store)
	s.decisions = s.newDecisionWriter(opts.Now, opts.DecisionLinger)
	s.retention = s.newRetention(opts.Now)
	if opts.Config.Rules.FailOpen {
		s.failurePolicy = ruleset.FailOpen
	}
	s.recorder = recorder{audit: s.audit, metrics: s.metrics,
		input: opts.Audit != nil && opts.Config.Audit.Sink != config.SinkNone && opts.Config.Audit.RecordsInput()}
	s.observers = engine.Compose(s.metrics.Hooks(), s.audit.Hooks(), opts.Observer)
	auth, err := newAuthenticator(opts.Config.Auth, nil, s.log)
	if err != nil {
		return nil, err
	}
	s.live.Store(&liveState{cfg: opts.Config, auth: auth})
	s.failures = httpguard.NewFailures(s.log, opts.Config.Auth.MaxFailuresPerMinute, nil)
	s.console = s.newConsole()
	if s.tools, err = s.buildTools(opts.Config, opts.MCP); err != nil {
		return nil, err
	}
	agents, err := buildAgents(opts.Config, nil)
	if err != nil {
		return nil, err
	}
	s.live.Store(&liveState{cfg: opts.Config, auth: auth, agents: agents})
	s.metrics.SetToolNames(configuredTool(opts.Config, s.tools))
	s.metrics.SetTenants(opts.Config.Tenants())
	s.metrics.SetFailurePolicy(s.failurePolicy.String())
	s.metrics.SetSources(metrics.Sources{
		RulesRejected:    func() bool { return len(s.rules.Status().LastError) > 0 },
		PendingApprovals: s.pendingApprovals,
	})
	s.buildSessions()
	s.kill = s.newKillSwitches(opts.Now)
	if s.quotas, err = s.newQuotas(opts.Now); err != nil {
		return nil, err
	}
	// Started last: a failed New leaves no extension worker or process.
	s.extensions = extension.New(opts.Config.Extensions, extension.Options{Logger: s.log, Metrics: s.metrics})
	s.notify = notify.New(notify.Options{Webhooks: opts.Config.ApprovalWebhooks, Logger: s.log, RetryBase: opts.NotifyRetryBase,
		Report: func(r notify.Report) {
			s.audit.Notification(&audit.Notification{Time: time.Now().UTC(), EventID: r.EventID, Event: r.Type, ApprovalID: r.ApprovalID,
				Tenant: r.Tenant, URL: r.URL, Outcome: r.Outcome, Attempts: r.Attempts, Status: r.Status, Error: r.Error})
		}})
	s.baseCtx, s.baseCancel = context.WithCancel(context.Background())
	s.subs = newSubmissions(s)
	if relay, ok := s.store.(store.Relay); ok {
		s.rep = newReplicas(s, relay)
	}
	s.handler = s.routes()
	return s, nil
}

// boundStore gives every call of st the deadline store.timeout, and says
// when the store becomes unavailable and when it answers again: a log
// line and turngate_store_up, with turngate_store_unavailable_total
// counting the failed calls.
func (s *Server) boundStore(st store.Store) store.Store {
	return store.Bounded(st, s.conf().Store.Timeout, store.Watch{
		Unavailable: func(err *store.UnavailableError) { s.metrics.StoreUnavailable.WithLabelValues(err.Op).Inc() },
		Changed: func(up bool, err *store.UnavailableError) {
			if up {
				s.metrics.StoreUp.Set(1)
				s.log.Info("store available again")
				return
			}
			s.metrics.StoreUp.Set(0)
			s.log.Error("store unavailable; requests fail with 503 store_unavailable until it answers", "op", err.Op, "err", err)
		},
	})
}

// recorder sends decision records to the audit log and the metrics.
type recorder struct {
	audit   *audit.Log
	metrics *metrics.Metrics
	// input says whether records carry the evaluated input: only when an
	// audit log keeps them and audit.recordInput is on.
	input bool
}

func (r recorder) Record(x *policy.Record) {
	r.audit.Record(x)
	r.metrics.Record(x)
}

// RecordsInput implements policy.InputRecorder.
func (r recorder) RecordsInput() bool { return r.input }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// buildAgents makes the runnable agents of cfg. Each keeps the session of
// its namesake in old (nil at start): the session configuration needs a
// restart, and its state (compactions, context files) outlives a reload.
func buildAgents(cfg *config.Config, old map[string]*agent) (map[string]*agent, error) {
	agents := map[string]*agent{}
	for _, a := range cfg.Agents {
		body, err := a.CompileBodySchema()
		if err != nil {
			return nil, fmt.Errorf("agent %s: bodySchema: %w", a.Name, err)
		}
		agents[a.Name] = &agent{name: a.Name, model: a.Model, system: a.System, toolNames: a.Tools, defaults: a.TurnDefaults(), bodySchema: body,
			files: cfg.AttachmentLimits(&a)}
		if prev := old[a.Name]; prev != nil {
			agents[a.Name].session = prev.session
		}
	}
	return agents, nil
}

// liveState is the configuration a Server serves and what is built from
// its live parts. It is never changed once stored: ApplyConfig stores a
// new one.
type liveState struct {
	cfg    *config.Config
	auth   *authenticator
	agents map[string]*agent
}

// conf returns the live configuration.
func (s *Server) conf() *config.Config { return s.live.Load().cfg }

// agents returns the live agents by name; an agent's tool list is the one
// of the configuration it was built from.
func (s *Server) agents() map[string]*agent { return s.live.Load().agents }

// auth returns the live authenticator (API keys, JWT verifier).
func (s *Server) auth() *authenticator { return s.live.Load().auth }

// retiredAuthGrace is how long a JWT verifier that a reload replaced
// keeps refreshing its keys for the requests that took it before the
// swap.
const retiredAuthGrace = time.Minute

// ApplyConfig makes cfg the live configuration: the API keys, JWT
// settings, limits, quotas' limits and agents' tool lists of requests and
// turns that start from now on are cfg's, while running turns finish on
// theirs. cfg must be
// validated as at startup and differ from the live configuration only in
// liveconfig.LiveFields (liveconfig.Diff; the Manager checks both). An
// error (a JWT verifier that cannot start) leaves the live configuration.
// A console session or WebSocket connection whose credential cfg no
// longer authenticates ends at its next request.
func (s *Server) ApplyConfig(cfg *config.Config) error {
	old := s.live.Load()
	auth, err := newAuthenticator(cfg.Auth, old, s.log)
	if err != nil {
		return err
	}
	agents, err := buildAgents(cfg, old.agents)
	if err == nil {
		err = s.quotas.SetLimits(cfg.Quotas)
	}
	if err != nil {
		if auth.jwt != old.auth.jwt {
			auth.close()
		}
		return err
	}
	s.live.Store(&liveState{cfg: cfg, auth: auth, agents: agents})
	// A console session whose key this configuration removed ends.
	s.console.ConfigChanged()
	s.metrics.SetToolNames(configuredTool(cfg, s.tools))
	s.metrics.SetTenants(cfg.Tenants())
	if old.auth.jwt != nil && old.auth.jwt != auth.jwt {
		time.AfterFunc(retiredAuthGrace, old.auth.close)
	}
	return nil
}

// configuredTool reports whether a name is a tool of the configuration:
// one of tools, or named in an agent's tool list (an MCP server's tool).
func configuredTool(cfg *config.Config, tools map[string]engine.Tool) func(string) bool {
	names := map[string]bool{}
	for name := range tools {
		names[name] = true
	}
	for _, a := range cfg.Agents {
		for _, name := range a.Tools {
			names[name] = true
		}
	}
	return func(name string) bool { return names[name] }
}

// Handler returns the gateway's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// MetricsHandler serves GET /metrics, behind metrics.key when one is set.
// Handler serves it too unless metrics.listen is set: then the caller
// serves this on that address.
func (s *Server) MetricsHandler() http.Handler {
	h := s.metrics.Handler()
	if sum, err := hex.DecodeString(s.conf().Metrics.KeySHA256); err == nil && len(sum) == sha256.Size {
		h = httpguard.RequireBearer([sha256.Size]byte(sum), h)
	}
	return h
}

// Start requeues the submissions a previous process left running and starts
// the submission workers. They stop at Shutdown.
func (s *Server) Start(ctx context.Context) error {
	if err := s.startKillSwitches(ctx); err != nil {
		return err
	}
	if s.rep != nil {
		s.stopRep = s.rep.start()
	}
	s.pruning.Go(func() { s.state.Run(s.baseCtx) })
	if s.decisions != nil {
		// The decision writer outlives the turns: a shutdown whose grace
		// ran out aborts them (baseCancel) and then stores their records.
		dctx, stop := context.WithCancel(context.Background())
		s.stopDecisions = stop
		s.pruning.Go(func() { s.decisions.Run(dctx) })
	}
	if s.retention != nil {
		s.pruning.Go(func() { s.runRetention(s.baseCtx) })
	}
	return s.subs.start(ctx)
}

// Shutdown stops admitting turns and claiming submissions, lets in-flight
// turns finish until ctx is done, then cancels them: they end aborted with
// their partial messages persisted. It returns once every turn has ended.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock() // see enterTurn
	s.closing.Store(true)
	s.mu.Unlock()
	s.subs.stop()
	done := make(chan struct{})
	go func() { s.turns.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.baseCancel()
		<-done
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wsShutdownGrace)
	s.ws.shutdown(wctx)
	cancel()
	s.flushDecisions(ctx)
	if s.stopDecisions != nil {
		s.stopDecisions()
	}
	s.baseCancel()
	s.pruning.Wait()
	s.subs.wait()
	s.extensions.Close(ctx)
	_ = s.notify.Close(ctx)
	if s.stopRep != nil {
		s.stopRep()
	}
	if s.stopKill != nil {
		s.stopKill()
	}
	s.auth().close()
	return err
}

// cancelTurn aborts the in-flight turn of tenant's session; it reports
// whether one was running.
func (s *Server) cancelTurn(tenant, sessionID string) bool {
	s.mu.Lock()
	t := s.active[sessionKey(tenant, sessionID)]
	s.mu.Unlock()
	if t == nil {
		return false
	}
	t.cancel()
	return true
}

// routes builds the gin engine.
func (s *Server) routes() http.Handler {
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	r.Use(s.metrics.HTTP(), s.recovery(), s.requestIDMiddleware, s.guard, s.limitBody)
	if s.conf().Tracing.Enabled {
		r.Use(traceContext)
	}
	r.NoRoute(s.handle(func(c *gin.Context) error {
		return errorf(http.StatusNotFound, CodeNotFound, "no route for %s %s", c.Request.Method, c.Request.URL.Path)
	}))
	r.NoMethod(s.handle(func(c *gin.Context) error {
		return errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method %s is not allowed here", c.Request.Method)
	}))

	r.GET("/healthz", s.handle(s.healthz))
	r.GET("/readyz", s.handle(s.readyz))
	if s.conf().Metrics.Listen == "" {
		r.GET("/metrics", gin.WrapH(s.MetricsHandler()))
	}

	// The console authenticates its own pages (gateway/console); the API
	// it calls takes its session cookie in authenticate.
	r.Any(console.Path, gin.WrapH(s.console))
	r.Any(console.Path+"/*page", gin.WrapH(s.console))

	v1 := r.Group("/v1", s.jsonBodies, s.authenticate)
	ag := v1.Group("/agents/:agent")
	ag.POST("/chat", s.handle(s.chat))
	ag.GET("/chat/:id/stream", s.handle(s.resumeStream))
	// The WebSocket handshake authenticates itself (ws.go): browsers
	// cannot send the Authorization header.
	r.GET("/v1/agents/:agent/ws", s.handle(s.chatWebSocket))
	ag.POST("/sessions/:id/messages", s.handle(s.saveMessages))
	ag.GET("/sessions/:id/messages", s.handle(s.history))
	ag.POST("/sessions/:id/continue", s.handle(s.continueLastTurn))
	ag.POST("/sessions/:id/cancel", s.handle(s.cancel))
	ag.GET("/sessions/:id/submissions/:sid", s.handle(s.submissionStatus))
	v1.GET("/approvals", s.handle(s.listApprovals))
	v1.GET("/approvals/:id", s.handle(s.getApproval))
	v1.POST("/approvals/:id", s.handle(s.decideApproval))
	ag.DELETE("/sessions/:id/submissions", s.handle(s.dropSubmissions))
	v1.GET("/agents", s.handle(s.listAgents))
	// Listing, exporting and erasing sessions are a tenant admin's: a
	// session has no owning principal, so any caller could reach every
	// session of the tenant.
	ag.GET("/sessions", s.requireAdmin, s.handle(s.listSessions))
	ag.GET("/sessions/:id/export", s.requireAdmin, s.handle(s.exportSession))
	ag.DELETE("/sessions/:id", s.requireAdmin, s.handle(s.deleteSession))

	oai := r.Group("/v1", func(c *gin.Context) { c.Set(errorFormatKey, formatOpenAI) }, s.jsonBodies, s.authenticate)
	oai.POST("/chat/completions", s.handle(s.chatCompletions))
	oai.GET("/models", s.handle(s.listModels))
	oai.GET("/models/*model", s.handle(s.retrieveModel))
	// Every /v1/messages response carries request-id (the X-Request-Id),
	// which Anthropic's SDKs read as the response's request_id.
	claude := r.Group("/v1", func(c *gin.Context) {
		c.Set(errorFormatKey, formatAnthropic)
		c.Header("request-id", requestID(c))
	}, s.jsonBodies, s.authenticate)
	claude.POST("/messages", s.handle(s.messages))

	admin := v1.Group("/admin", s.requireAdmin)
	admin.GET("/rules", s.handle(s.rulesStatus))
	admin.GET("/config", s.handle(s.configStatus))
	admin.POST("/rules/reload", s.handle(s.rulesReload))
	admin.POST("/rules/eval", s.handle(s.rulesEval))
	admin.POST("/killswitch", s.handle(s.setKillSwitch))
	admin.GET("/killswitch", s.handle(s.listKillSwitches))
	admin.DELETE("/killswitch/:id", s.handle(s.liftKillSwitch))
	admin.GET("/decisions", s.handle(s.listDecisions))
	admin.GET("/decisions/:id", s.handle(s.getDecision))
	admin.POST("/replay", s.handle(s.replayDecisions))

	if s.conf().Debug.Pprof {
		routePprof(r.Group("/debug/pprof", s.authenticate, s.requireAdmin))
	}
	return r
}

// routePprof serves net/http/pprof's profiles on g (debug.pprof, admin
// role only): the index, cmdline, profile, symbol, trace and every named
// profile (heap, goroutine, allocs, block, mutex, threadcreate).
func routePprof(g *gin.RouterGroup) {
	g.GET("/", gin.WrapF(pprof.Index))
	g.GET("/cmdline", gin.WrapF(pprof.Cmdline))
	g.GET("/profile", gin.WrapF(pprof.Profile))
	g.GET("/symbol", gin.WrapF(pprof.Symbol))
	g.POST("/symbol", gin.WrapF(pprof.Symbol))
	g.GET("/trace", gin.WrapF(pprof.Trace))
	g.GET("/:profile", gin.WrapF(pprof.Index))
}

// requestIDHeader carries the request id both ways.
const requestIDHeader = "X-Request-Id"

const requestIDKey = "turngate.requestId"

// requestIDMiddleware takes a well-formed X-Request-Id or makes one, and
// echoes it.
func (s *Server) requestIDMiddleware(c *gin.Context) {
	id := c.GetHeader(requestIDHeader)
	if !validID(id) {
		id = newID("req_")
	}
	c.Set(requestIDKey, id)
	c.Header(requestIDHeader, id)
	c.Next()
}

func requestID(c *gin.Context) string { return c.GetString(requestIDKey) }

// limitBody caps every request body at Limits.MaxBodyBytes and bounds
// the time to receive it at Limits.ReadBodyTimeout, per request rather than
// with the server's ReadTimeout: the deadline is lifted as soon as the body
// has been read, so a chat stream or a resume may last as long as its turn.
// A body that stops short of its Content-Length, or trickles in, fails
// with 408 once the deadline passes and the connection is closed; so does
// a body nobody reads (a request refused before its body is read), which
// the server drains after the handler.
func (s *Server) limitBody(c *gin.Context) {
	if body := c.Request.Body; body != nil && body != http.NoBody {
		rc := http.NewResponseController(c.Writer)
		if rc.SetReadDeadline(time.Now().Add(s.conf().Limits.ReadBodyTimeout)) == nil {
			body = &deadlineBody{ReadCloser: body, rc: rc}
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, body, s.conf().Limits.MaxBodyBytes)
	}
	c.Next()
}

// deadlineBody lifts the connection's read deadline when the body has been
// read to its end: from then on the server reads only to notice that the
// client went away, which must not time out during a long response.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// agentOf returns the route's agent or a 404.
func (s *Server) agentOf(c *gin.Context) (*agent, error) {
	name := c.Param("agent")
	a, ok := s.agents()[name]
	if !ok {
		return nil, errorf(http.StatusNotFound, CodeAgentNotFound, "no agent named %q", name)
	}
	return a, nil
}

// healthz reports that the process serves HTTP.
func (s *Server) healthz(c *gin.Context) error {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
	return nil
}

// readyzTimeout bounds the readiness probe's store check.
const readyzTimeout = 2 * time.Second

// readyz reports whether the store answers and a rule revision is live.
func (s *Server) readyz(c *gin.Context) error {
	ctx, cancel := context.WithTimeout(c.Request.Context(), readyzTimeout)
	defer cancel()
	checks := gin.H{"store": "ok", "rules": "ok"}
	ready := true
	// Any session will do: found or not, the store answered. No NUL in
	// the ids: PostgreSQL's text refuses it (ErrInvalid, never ready).
	if _, err := s.store.GetSession(ctx, "readyz", "readyz"); err != nil && !errors.Is(err, store.ErrNotFound) {
		checks["store"], ready = "unreachable", false
	}
	if s.rules.Current() == nil {
		checks["rules"], ready = "not loaded", false
	}
	if s.closing.Load() {
		ready = false
		checks["shutdown"] = "in progress"
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	body := gin.H{"ready": ready, "checks": checks}
	// Which replica answers, its revision and the kill switches in force
	// (an incident under way) are for operators: a request with an API key
	// (any) sees them, an anonymous probe does not.
	if _, err := s.bearerPrincipal(c.Request.Context(), c.GetHeader("Authorization")); err == nil || s.auth().open() {
		body["killSwitches"] = len(s.kill.Active())
		body["replica"] = s.conf().Replica.ID
		if rev := s.rules.Current(); rev != nil {
			body["revision"] = rev.ID()
		}
	}
	c.JSON(status, body)
	return nil
}
