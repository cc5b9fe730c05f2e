// Package metrics holds turngate's Prometheus collectors and the adapters
// that feed them: an engine.Hooks observer, a policy.Recorder and an
// instrumented engine.ModelResolver.
package metrics

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/opa"
)

// Metrics is one registry of turngate's collectors. Each gateway has its
// own, so tests can run several gateways in one process.
type Metrics struct {
	registry    *prometheus.Registry
	Turns       *prometheus.CounterVec
	Steps       *prometheus.CounterVec
	ToolCalls   *prometheus.CounterVec
	HookEval    *prometheus.HistogramVec
	RuleReloads *prometheus.CounterVec
	// RuleReloadRejections counts rejected candidates by reason
	// (ruleset.RejectReason: compile, test, io).
	RuleReloadRejections *prometheus.CounterVec
	// ConfigReloads counts config file reloads by result (accepted,
	// rejected).
	ConfigReloads *prometheus.CounterVec
	// ConfigReloadRejected is 1 while the last config reload was
	// rejected (the last good configuration serves), else 0.
	ConfigReloadRejected prometheus.Gauge
	// ShadowEffects counts what shadow rules would have done, by hook,
	// rule and effect (block, substitute, patch, redact, override).
	ShadowEffects   *prometheus.CounterVec
	UpstreamSeconds *prometheus.HistogramVec
	UpstreamErrors  *prometheus.CounterVec
	ActiveStreams   prometheus.Gauge
	// WebSocketConnections is the number of open WebSocket chat
	// connections.
	WebSocketConnections prometheus.Gauge
	// Approvals counts tool-call approvals by tool and outcome
	// (requested, approved, denied, expired, ignored).
	Approvals *prometheus.CounterVec
	// ExtensionDrops counts observation deliveries dropped because an
	// extension's queue was full, by extension and hook.
	ExtensionDrops *prometheus.CounterVec
	// ExtensionFailures counts failed deliveries by extension, hook and
	// reason (timeout, error, invalid).
	ExtensionFailures *prometheus.CounterVec
	// Compactions counts conversation compactions by agent and reason
	// (threshold, overflow).
	Compactions *prometheus.CounterVec
	// InputTokens counts the input tokens providers reported, by agent and
	// kind: cached (read from the provider's prompt cache) or uncached.
	InputTokens *prometheus.CounterVec
	// OutputTokens counts the output tokens providers reported, by agent.
	OutputTokens *prometheus.CounterVec
	// KillSwitchStops counts what the kill switches stopped, by what
	// (tool_call, turn) and the switch's scope kind (fleet, tenant, agent,
	// tenant_agent): never by tenant or switch id, so the series stay few.
	KillSwitchStops *prometheus.CounterVec
	// QuotaExceeded counts what the config's quotas refused or stopped, by
	// quota (a configured name), per (its key: tenant, principal, agent,
	// tenant+agent…) and at (turn: refused before its model; step: stopped
	// at a step boundary).
	QuotaExceeded *prometheus.CounterVec
	// StoreUnavailable counts store calls that failed because the store
	// was unavailable (down, frozen past store.timeout, refusing
	// connections), by store method.
	StoreUnavailable *prometheus.CounterVec
	// StoreUp is 1 while the store answers, 0 from a call that found it
	// unavailable until one succeeds again.
	StoreUp prometheus.Gauge
	// DecisionRecords counts the hook records the decision store took, by
	// outcome: stored, or dropped (its queue full through a long store
	// outage; the JSONL audit log still has them).
	DecisionRecords *prometheus.CounterVec
	// DecisionsPending is how many hook records wait to be stored.
	DecisionsPending prometheus.Gauge
	// SessionsPruned counts the sessions retention erased, by agent.
	SessionsPruned *prometheus.CounterVec

	// Decisions counts rule evaluations by hook, outcome (matched,
	// no_match, not_evaluated, error) and tenant.
	Decisions *prometheus.CounterVec
	// RuleFailures counts rule evaluations that failed, by hook and the
	// failure policy that decided what the failure did (fail-closed: the
	// turn or tool call failed; fail-open: it went on unchecked).
	RuleFailures *prometheus.CounterVec
	// HTTPDuration observes each HTTP request, by route (gin's template,
	// UnmatchedRoute for none), method and status.
	HTTPDuration *prometheus.HistogramVec
	// TurnDuration observes each turn, from its start to its recorded end,
	// by agent and status.
	TurnDuration *prometheus.HistogramVec
	// FirstChunk observes, per turn, the time from its start to the first
	// chunk of model output handed to the client's stream, by agent.
	FirstChunk *prometheus.HistogramVec
	// ToolDuration observes each executed tool call, by tool.
	ToolDuration *prometheus.HistogramVec
	// QuotaUsedRatio is used/limit of each quota, by quota and tenant, as
	// last read for a turn of that tenant (for a per-principal quota, the
	// last principal's).
	QuotaUsedRatio *prometheus.GaugeVec

	// knownTool, when set, says which tool names are labels (ToolLabel).
	knownTool atomic.Pointer[func(string) bool]
	// knownTenant, when set, holds the tenants that are labels
	// (TenantLabel).
	knownTenant atomic.Pointer[map[string]bool]
	// failurePolicy is the RuleFailures policy label (SetFailurePolicy).
	failurePolicy atomic.Pointer[string]
	// sources are what the scrape-time gauges read (SetSources).
	sources atomic.Pointer[Sources]
}

// Other is the tool or tenant label of every name the gateway has not
// configured: a model, a client or an identity provider may name any tool
// or tenant, and a label value of their choosing would grow the series,
// the scrape and the memory without bound.
const Other = "other"

// UnmatchedRoute is the route label of a request no route matched (a 404
// or 405 of the router): its raw path would be a label of the client's
// choosing.
const UnmatchedRoute = "unmatched"

// SetToolNames makes the tool labels (ToolCalls, ToolDuration, Approvals)
// take only names known reports true for, Other for the rest. Until it is
// called every name is a label (a registry of tests).
func (m *Metrics) SetToolNames(known func(name string) bool) { m.knownTool.Store(&known) }

// ToolLabel is the tool label of name.
func (m *Metrics) ToolLabel(name string) string {
	if known := m.knownTool.Load(); known != nil && !(*known)(name) {
		return Other
	}
	return name
}

// SetTenants makes the tenant labels take only the tenants named, Other
// for the rest. Until it is called every tenant is a label (a registry of
// tests). A configuration reload that changes the tenants calls it again.
func (m *Metrics) SetTenants(tenants []string) {
	known := make(map[string]bool, len(tenants))
	for _, t := range tenants {
		known[t] = true
	}
	m.knownTenant.Store(&known)
}

// TenantLabel is the tenant label of tenant.
func (m *Metrics) TenantLabel(tenant string) string {
	if known := m.knownTenant.Load(); known != nil && !(*known)[tenant] {
		return Other
	}
	return tenant
}

// hooks are the rule hooks, each a RuleFailures series from the start.
var hooks = []string{policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforeToolCall, policy.HookToolResult, policy.HookBeforePersist, policy.HookOnChatError}

// SetFailurePolicy names the gateway's failure policy ("fail-closed",
// "fail-open"), the policy label of RuleFailures, and makes its series of
// every hook exist at zero so that an alert on them has a series to read.
func (m *Metrics) SetFailurePolicy(name string) {
	m.failurePolicy.Store(&name)
	for _, h := range hooks {
		m.RuleFailures.WithLabelValues(h, name)
	}
}

// Sources are what the scrape-time gauges read. A nil field leaves its
// gauge at zero (RulesRejected) or without series (PendingApprovals).
type Sources struct {
	// RulesRejected reports whether the last rules reload was rejected.
	RulesRejected func() bool
	// PendingApprovals counts the pending approvals by tenant; an error
	// leaves the gauge out of that scrape.
	PendingApprovals func(ctx context.Context) (map[string]int, error)
}

// SetSources sets what the scrape-time gauges read.
func (m *Metrics) SetSources(s Sources) { m.sources.Store(&s) }

// New returns Metrics registered on a fresh registry, with the Go runtime
// and process collectors.
func New() *Metrics {
	const ns = "turngate"
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		Turns: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "turns_total",
			Help: "Turns by agent, tenant (\"other\" for one not configured) and final status (completed, error, aborted, skipped)."}, []string{"agent", "tenant", "status"}),
		Steps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "steps_total",
			Help: "Model steps by agent."}, []string{"agent"}),
		ToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "tool_calls_total",
			Help: "Tool calls by tool (\"other\" for a name not configured), tenant and decision (allow, rewrite, block, substitute, error, client, denied: its approval was denied or expired)."}, []string{"tool", "tenant", "decision"}),
		HookEval: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "hook_eval_seconds",
			Help: "Rule evaluation latency by hook.", Buckets: []float64{1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5}}, []string{"hook"}),
		RuleReloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rule_reloads_total",
			Help: "Rule reloads by result (success, failure, unchanged)."}, []string{"result"}),
		RuleReloadRejections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rule_reload_rejections_total",
			Help: "Rejected rule reloads by reason: compile (a file does not parse or compile), test (a test failed or required tests are missing), io (a file could not be read)."}, []string{"reason"}),
		ConfigReloads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "config_reloads_total",
			Help: "Config file reloads by result: accepted (live), rejected (the last good configuration serves)."}, []string{"result"}),
		ConfigReloadRejected: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "config_reload_rejected",
			Help: "1 while the last config reload was rejected (GET /v1/admin/config says why), else 0."}),
		ShadowEffects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "shadow_effects_total",
			Help: "Shadow rules that fired (evaluated, never enforced), by hook, rule and would-be effect (block, substitute, patch, redact, override)."}, []string{"hook", "rule", "effect"}),
		UpstreamSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "upstream_request_seconds",
			Help: "Upstream model stream duration, from request to the end of the stream, by model.", Buckets: prometheus.DefBuckets}, []string{"model"}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "upstream_errors_total",
			Help: "Upstream model failures by model."}, []string{"model"}),
		ActiveStreams: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "active_streams",
			Help: "Responses currently streaming to clients: SSE over HTTP and WebSocket streams."}),
		WebSocketConnections: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "websocket_connections",
			Help: "Open WebSocket chat connections (GET /v1/agents/{agent}/ws)."}),
		Approvals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "approvals_total",
			Help: "Tool-call approvals by tool (\"other\" for a name not configured) and outcome: requested, approved, denied, expired, ignored (an answer that did not count)."}, []string{"tool", "outcome"}),
		ExtensionDrops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "extension_dropped_total",
			Help: "Extension deliveries dropped because the extension's queue was full, by extension and hook."}, []string{"extension", "hook"}),
		ExtensionFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "extension_failures_total",
			Help: "Failed extension deliveries by extension, hook and reason: timeout (no answer in time), error (transport, HTTP status, process down, an {error} answer), invalid (an answer or result field that does not apply)."}, []string{"extension", "hook", "reason"}),
		InputTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "input_tokens_total",
			Help: "Input tokens reported by the providers, by agent, tenant and kind: cached (read from the prompt cache: OpenAI cached_tokens, Anthropic cache_read_input_tokens) or uncached."}, []string{"agent", "tenant", "kind"}),
		OutputTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "output_tokens_total",
			Help: "Output tokens reported by the providers, by agent and tenant."}, []string{"agent", "tenant"}),
		KillSwitchStops: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "killswitch_stops_total",
			Help: "What the kill switches stopped, by what (tool_call, turn) and the switch's scope kind (fleet, tenant, agent, tenant_agent)."}, []string{"what", "scope"}),
		QuotaExceeded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "quota_exceeded_total",
			Help: "Turns the config's quotas refused (at=turn) or stopped at a step boundary (at=step), by quota name and its per key."}, []string{"quota", "per", "at"}),
		Compactions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "compactions_total",
			Help: "Conversation compactions by agent and reason (threshold: compaction.after passed; overflow: the upstream rejected a step as too long)."}, []string{"agent", "reason"}),
		StoreUnavailable: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "store_unavailable_total",
			Help: "Store calls that failed because the store was unavailable (unreachable, or no answer within store.timeout), by store method."}, []string{"op"}),
		StoreUp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "store_up",
			Help: "1 while the store answers; 0 from a call that found it unavailable until a call succeeds again."}),
		DecisionRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "decision_records_total",
			Help: "Hook records the decision store took, by outcome: stored, or dropped (its queue full through a long store outage; the JSONL audit log has them)."}, []string{"outcome"}),
		DecisionsPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "decision_records_pending",
			Help: "Hook records waiting to be written to the decision store."}),
		SessionsPruned: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "sessions_pruned_total",
			Help: "Sessions erased by retention (idle longer than their tenant's or agent's retention), by agent."}, []string{"agent"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "decisions_total",
			Help: "Rule evaluations by hook, outcome (matched, no_match, not_evaluated, error) and tenant."}, []string{"hook", "outcome", "tenant"}),
		RuleFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rule_failures_total",
			Help: "Rule evaluations that failed, by hook and the failure policy that decided: fail-closed (the turn or tool call failed) or fail-open (it went on unchecked)."}, []string{"hook", "policy"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "http_request_duration_seconds",
			Help:    "HTTP requests by route (the route's template, \"unmatched\" for none), method and status; a streamed response lasts until its stream ends.",
			Buckets: durationBuckets}, []string{"route", "method", "status"}),
		TurnDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "turn_duration_seconds",
			Help: "Turns from their start to their recorded end, by agent and final status.", Buckets: durationBuckets}, []string{"agent", "status"}),
		FirstChunk: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "time_to_first_chunk_seconds",
			Help:    "Time from a turn's start to the first chunk of model output (text, reasoning, a tool call) handed to the client's stream, by agent.",
			Buckets: durationBuckets}, []string{"agent"}),
		ToolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "tool_call_duration_seconds",
			Help: "Executed tool calls by tool (\"other\" for a name not configured).", Buckets: durationBuckets}, []string{"tool"}),
		QuotaUsedRatio: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "quota_used_ratio",
			Help: "Used over limit of each configured quota, by quota and tenant, as last read for a turn of the tenant (a per-principal quota: the last principal's)."}, []string{"quota", "tenant"}),
	}
	m.StoreUp.Set(1)
	m.registry.MustRegister(m.Turns, m.Steps, m.ToolCalls, m.HookEval, m.RuleReloads, m.RuleReloadRejections, m.ConfigReloads, m.ConfigReloadRejected, m.ShadowEffects, m.UpstreamSeconds,
		m.UpstreamErrors, m.ActiveStreams, m.WebSocketConnections, m.Approvals, m.ExtensionDrops, m.ExtensionFailures, m.Compactions, m.InputTokens, m.OutputTokens, m.KillSwitchStops, m.QuotaExceeded,
		m.StoreUnavailable, m.StoreUp, m.DecisionRecords, m.DecisionsPending, m.SessionsPruned, m.Decisions, m.RuleFailures,
		m.HTTPDuration, m.TurnDuration, m.FirstChunk, m.ToolDuration, m.QuotaUsedRatio, pendingApprovals{m},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "rule_reload_rejected",
			Help: "1 when the last rules reload was rejected (the last good revision serves), else 0."}, m.rulesRejected),
		specialisedCounter("hits", func(s opa.SpecialisedStats) uint64 { return s.Hits }),
		specialisedCounter("misses", func(s opa.SpecialisedStats) uint64 { return s.Misses }),
		specialisedCounter("fallbacks", func(s opa.SpecialisedStats) uint64 { return s.Fallbacks }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// durationBuckets are the buckets of the request, turn and tool
// histograms, in seconds: from a cached answer to a long streamed turn.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// rulesRejected reads Sources.RulesRejected as 1 or 0.
func (m *Metrics) rulesRejected() float64 {
	if s := m.sources.Load(); s != nil && s.RulesRejected != nil && s.RulesRejected() {
		return 1
	}
	return 0
}

// pendingApprovalsTimeout bounds the store read of one scrape: a slow
// store leaves the gauge out rather than hold the scrape.
const pendingApprovalsTimeout = 2 * time.Second

// pendingApprovals collects turngate_approvals_pending{tenant} at scrape
// time from Sources.PendingApprovals.
type pendingApprovals struct{ m *Metrics }

var pendingApprovalsDesc = prometheus.NewDesc("turngate_approvals_pending",
	"Tool-call approvals waiting for an approver, by tenant (read from the store at scrape time: the same on every replica).", []string{"tenant"}, nil)

func (p pendingApprovals) Describe(ch chan<- *prometheus.Desc) { ch <- pendingApprovalsDesc }

func (p pendingApprovals) Collect(ch chan<- prometheus.Metric) {
	s := p.m.sources.Load()
	if s == nil || s.PendingApprovals == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), pendingApprovalsTimeout)
	defer cancel()
	counts, err := s.PendingApprovals(ctx)
	if err != nil {
		return
	}
	for tenant, n := range counts {
		ch <- prometheus.MustNewConstMetric(pendingApprovalsDesc, prometheus.GaugeValue, float64(n), tenant)
	}
}

// specialisedCounter exports one of policy/opa's specialised evaluation
// counters (process-wide, over every rule revision) as
// turngate_rego_specialised_NAME_total.
func specialisedCounter(name string, read func(opa.SpecialisedStats) uint64) prometheus.CounterFunc {
	help := map[string]string{
		"hits":      "Rego decisions a residual specialised per (tool, tenant) answered.",
		"misses":    "Rego decisions of a (tool, tenant) without a residual yet: the generic query answered while one is built.",
		"fallbacks": "Rego decisions the generic query answered because the residual failed or the (tool, tenant) cannot be specialised.",
	}[name]
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "turngate", Name: "rego_specialised_" + name + "_total", Help: help},
		func() float64 { return float64(read(opa.Specialised())) })
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Gatherer exposes the registry (for tests).
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.registry }

// Record implements policy.Recorder: it observes the evaluation latency
// and counts the effect of each shadow rule that fired, whatever the hook.
func (m *Metrics) Record(r *policy.Record) {
	m.HookEval.WithLabelValues(r.Hook).Observe(float64(r.DurationMicros) / 1e6)
	m.Decisions.WithLabelValues(r.Hook, r.Outcome, m.TenantLabel(r.Tenant)).Inc()
	if p := m.failurePolicy.Load(); p != nil && r.Outcome == policy.OutcomeError {
		m.RuleFailures.WithLabelValues(r.Hook, *p).Inc()
	}
	if s := r.Shadow; s != nil {
		for _, rule := range s.RulesFired {
			m.ShadowEffects.WithLabelValues(r.Hook, rule, s.Effect(rule)).Inc()
		}
	}
}

// Hooks returns an observer that counts steps and tool calls. It changes
// nothing in the turn.
func (m *Metrics) Hooks() engine.Hooks { return observer{m: m} }

type observer struct {
	engine.NopHooks
	m *Metrics
}

func (o observer) OnStepFinish(_ context.Context, s *engine.StepResult) {
	o.m.Steps.WithLabelValues(s.Agent).Inc()
	tenant := o.m.TenantLabel(s.Principal.Tenant)
	if u := s.Usage; u.InputTokens > 0 {
		o.m.InputTokens.WithLabelValues(s.Agent, tenant, "cached").Add(float64(u.CachedInputTokens))
		o.m.InputTokens.WithLabelValues(s.Agent, tenant, "uncached").Add(float64(max(u.InputTokens-u.CachedInputTokens, 0)))
	}
	if u := s.Usage; u.OutputTokens > 0 {
		o.m.OutputTokens.WithLabelValues(s.Agent, tenant).Add(float64(u.OutputTokens))
	}
}

func (o observer) AfterToolCall(_ context.Context, rc *engine.ToolCallResultContext) {
	tool := o.m.ToolLabel(rc.ToolName)
	o.m.ToolCalls.WithLabelValues(tool, o.m.TenantLabel(rc.Principal.Tenant), rc.Decision).Inc()
	if rc.Executed {
		o.m.ToolDuration.WithLabelValues(tool).Observe(rc.DurationMs / 1000)
	}
}

// Turn observes a finished turn of agent and tenant: its count by status
// and its duration.
func (m *Metrics) Turn(agent, tenant, status string, d time.Duration) {
	m.Turns.WithLabelValues(agent, m.TenantLabel(tenant), status).Inc()
	m.TurnDuration.WithLabelValues(agent, status).Observe(d.Seconds())
}

// HTTP returns a gin middleware observing each request's duration by
// route template, method and status. A method outside net/http's is
// counted as "other", as a tool no one configured is.
func (m *Metrics) HTTP() gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = UnmatchedRoute
		}
		method := c.Request.Method
		if !slices.Contains(httpMethods, method) {
			method = Other
		}
		m.HTTPDuration.WithLabelValues(route, method, strconv.Itoa(c.Writer.Status())).Observe(time.Since(start).Seconds())
	}
}

// httpMethods are the methods that are method labels.
var httpMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}

// Resolver wraps r so that every provider stream it resolves is timed and
// its failures counted under the model name asked for.
func (m *Metrics) Resolver(r engine.ModelResolver) engine.ModelResolver {
	return resolver{next: r, m: m}
}

type resolver struct {
	next engine.ModelResolver
	m    *Metrics
}

func (r resolver) Resolve(model string) (engine.Provider, string, error) {
	p, id, err := r.next.Resolve(model)
	if err != nil {
		return nil, "", err
	}
	return provider{next: p, m: r.m, model: model}, id, nil
}

type provider struct {
	next  engine.Provider
	m     *Metrics
	model string
}

func (p provider) Stream(ctx context.Context, req *engine.ModelRequest) (engine.Stream, error) {
	start := time.Now()
	s, err := p.next.Stream(ctx, req)
	if err != nil {
		p.m.UpstreamSeconds.WithLabelValues(p.model).Observe(time.Since(start).Seconds())
		if !errors.Is(err, context.Canceled) {
			p.m.UpstreamErrors.WithLabelValues(p.model).Inc()
		}
		return nil, err
	}
	return &stream{Stream: s, p: p, start: start}, nil
}

// CheckFile forwards to the wrapped provider's engine.FileChecker; a
// provider without one takes every file.
func (p provider) CheckFile(mediaType string, remote bool) error {
	if fc, ok := p.next.(engine.FileChecker); ok {
		return fc.CheckFile(mediaType, remote)
	}
	return nil
}

// stream observes the duration once, when the stream ends or is closed.
type stream struct {
	engine.Stream
	p     provider
	start time.Time
	done  bool
}

func (s *stream) Next() bool {
	if s.Stream.Next() {
		return true
	}
	s.finish()
	return false
}

func (s *stream) Close() error {
	s.finish()
	return s.Stream.Close()
}

func (s *stream) finish() {
	if s.done {
		return
	}
	s.done = true
	s.p.m.UpstreamSeconds.WithLabelValues(s.p.model).Observe(time.Since(s.start).Seconds())
	if err := s.Stream.Err(); err != nil && !errors.Is(err, context.Canceled) {
		s.p.m.UpstreamErrors.WithLabelValues(s.p.model).Inc()
	}
}

// ShadowCount is how often one shadow rule fired on this replica since it
// started, for one hook and would-be effect: each time, the shadow rules
// would have decided otherwise than the enforced ones.
type ShadowCount struct {
	Rule   string `json:"rule"`
	Hook   string `json:"hook"`
	Effect string `json:"effect"`
	Count  int64  `json:"disagreements"`
}

// ShadowCounts reads turngate_shadow_effects_total, sorted by rule, hook
// and effect.
func (m *Metrics) ShadowCounts() []ShadowCount {
	ch := make(chan prometheus.Metric, 64)
	go func() { m.ShadowEffects.Collect(ch); close(ch) }()
	out := []ShadowCount{}
	for pm := range ch {
		var d dto.Metric
		if pm.Write(&d) != nil {
			continue
		}
		var c ShadowCount
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "rule":
				c.Rule = l.GetValue()
			case "hook":
				c.Hook = l.GetValue()
			case "effect":
				c.Effect = l.GetValue()
			}
		}
		c.Count = int64(d.GetCounter().GetValue())
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ShadowCount) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Hook, b.Hook), cmp.Compare(a.Effect, b.Effect))
	})
	return out
}
