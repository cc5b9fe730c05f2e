// Package extension dispatches a turn's hooks to extensions: outside
// programs configured in turngate.yaml (config.Extension), reached over
// HTTP (a signed JSON POST) or as a long-lived child process speaking JSON
// lines. It implements the reference's extension subscriptions
// (think-implementation.md §2.11): extensions run after the rules, in
// configuration order, and receive the reference's JSON snapshots.
//
// Only beforeTurn answers are used, and only the scalar TurnConfig fields
// the reference lets extensions set; they combine with the rules' result
// so that an extension never loosens a restriction a rule set
// (celrules.ApplyExternal). beforeTurn waits for each extension at most its
// timeout; the other hooks only enqueue a delivery, which a worker per
// extension sends in order, so a slow or dead extension never delays a
// turn. docs/EXTENSIONS.md is the operator's and extension author's guide.
package extension

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/metrics"
	"github.com/turngate/turngate/internal/tracing"
	"github.com/turngate/turngate/policy/celrules"
)

// Hook names (the reference's subscription set).
const (
	HookBeforeTurn     = "beforeTurn"
	HookBeforeToolCall = "beforeToolCall"
	HookAfterToolCall  = "afterToolCall"
	HookOnStepFinish   = "onStepFinish"
	HookOnChunk        = "onChunk"
)

// onChunk batching: a batch of one turn's chunks is sent when it holds
// ChunkBatchMax chunks, ChunkBatchInterval after its first chunk was
// queued, or as soon as a delivery of another kind (or turn) follows it.
const (
	ChunkBatchInterval = 100 * time.Millisecond
	ChunkBatchMax      = 64
)

// Failure reasons, as the turngate_extension_failures_total metric labels
// them.
const (
	reasonTimeout = "timeout" // no answer within the extension's timeout
	reasonError   = "error"   // transport failure, HTTP error, process down, {error} answer
	reasonInvalid = "invalid" // an answer that is not a valid Response, or a result field that does not apply
)

// Options are a Set's dependencies.
type Options struct {
	// Logger receives delivery failures; nil is slog.Default.
	Logger *slog.Logger
	// Metrics counts drops and failures; nil makes a private registry.
	Metrics *metrics.Metrics
	// Transport carries the http extensions' requests (NewHTTPClient);
	// nil is http.DefaultTransport.
	Transport http.RoundTripper
}

// Set is the configured extensions, running. It is safe for concurrent
// use; Close stops it.
type Set struct {
	exts    []*ext
	log     *slog.Logger
	metrics *metrics.Metrics
	closed  atomic.Bool
}

// ext is one running extension.
type ext struct {
	cfg    config.Extension
	hooks  map[string]bool
	agents map[string]bool // nil: every agent
	tr     transport
	log    *slog.Logger
	set    *Set
	seq    atomic.Uint64
	queue  chan delivery
	stop   chan struct{}
	done   chan struct{}
	warned throttle
	// drops are the drop counters by hook, resolved once: a full queue
	// on the onChunk path costs no label lookup.
	drops map[string]prometheus.Counter
	// ctx bounds the worker's deliveries; Close cancels it when its own
	// context ends before the queue is drained.
	ctx    context.Context
	cancel context.CancelFunc
}

// delivery is one queued observation.
type delivery struct {
	hook     string
	identity engine.Identity
	snapshot any // a snapshot value, or a ChunkSnapshot for onChunk
	// ctx is the worker's context carrying the turn's trace context, so
	// the delivery's request continues the turn's trace.
	ctx context.Context
}

// New starts the extensions of cfgs (exec extensions' processes and every
// extension's delivery worker). With none it returns an empty Set whose
// Wrap adds nothing.
func New(cfgs []config.Extension, opts Options) *Set {
	s := &Set{log: opts.Logger, metrics: opts.Metrics}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.metrics == nil {
		s.metrics = metrics.New()
	}
	client := NewHTTPClient(opts.Transport)
	for _, c := range cfgs {
		x := &ext{cfg: c, hooks: map[string]bool{}, log: s.log.With("extension", c.Name), set: s,
			queue: make(chan delivery, c.QueueSize), stop: make(chan struct{}), done: make(chan struct{})}
		x.ctx, x.cancel = context.WithCancel(context.Background())
		x.drops = map[string]prometheus.Counter{}
		for _, h := range c.Hooks {
			x.hooks[h] = true
			x.drops[h] = s.metrics.ExtensionDrops.WithLabelValues(c.Name, h)
		}
		if len(c.Agents) > 0 {
			x.agents = map[string]bool{}
			for _, a := range c.Agents {
				x.agents[a] = true
			}
		}
		switch c.Transport {
		case config.TransportExec:
			x.tr = newExecTransport(c.Command, c.Env, x.log)
		default:
			x.tr = &httpTransport{client: client, url: c.URL, name: c.Name, secret: []byte(c.Secret), now: time.Now}
		}
		go x.work()
		s.exts = append(s.exts, x)
	}
	return s
}

// Close stops the extensions: each worker sends what is still queued
// until ctx is done (what remains is dropped and counted), then exec
// processes are stopped.
func (s *Set) Close(ctx context.Context) {
	if s == nil || !s.closed.CompareAndSwap(false, true) {
		return
	}
	for _, x := range s.exts {
		close(x.stop)
	}
	for _, x := range s.exts {
		select {
		case <-x.done:
		case <-ctx.Done():
			x.cancel()
			<-x.done
		}
		x.cancel()
		x.tr.close()
	}
}

// subscribed reports whether x receives hook for agent's turns.
func (x *ext) subscribed(hook, agent string) bool {
	return x.hooks[hook] && (x.agents == nil || x.agents[agent])
}

// envelope builds and encodes the next delivery's envelope.
func (x *ext) envelope(hook string, id *engine.Identity, snapshot any, chunks []ChunkSnapshot) (uint64, []byte, error) {
	n := x.seq.Add(1)
	body, err := json.Marshal(&Envelope{Version: Version, ID: n, Extension: x.cfg.Name, Hook: hook,
		RequestID: id.RequestID, SessionID: id.SessionID, Agent: id.Agent, Deadline: id.Deadline, Aborted: id.Aborted,
		Snapshot: snapshot, Snapshots: chunks})
	return n, body, err
}

// deliver sends one envelope and returns the extension's parsed answer;
// a failure is logged and counted, and returns nil.
func (x *ext) deliver(ctx context.Context, hook string, id *engine.Identity, snapshot any, chunks []ChunkSnapshot) *Response {
	n, body, err := x.envelope(hook, id, snapshot, chunks)
	if err != nil {
		x.fail(hook, reasonInvalid, "encoding the delivery", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	answer, err := x.tr.call(ctx, n, body)
	switch {
	case isTimeout(err):
		x.fail(hook, reasonTimeout, "no answer within the extension's timeout", err, "timeout", x.cfg.Timeout)
		return nil
	case errors.Is(err, errTooLarge):
		x.fail(hook, reasonInvalid, "invalid answer", err)
		return nil
	case err != nil:
		x.fail(hook, reasonError, "delivery failed", err)
		return nil
	}
	r, err := ParseResponse(answer)
	if err != nil {
		x.fail(hook, reasonInvalid, "invalid answer", err)
		return nil
	}
	if r.Error != "" {
		x.fail(hook, reasonError, "the extension answered an error", nil, "error", excerpt([]byte(r.Error)))
		return nil
	}
	return r
}

// fail logs (throttled) and counts a failed delivery.
func (x *ext) fail(hook, reason, msg string, err error, args ...any) {
	x.set.metrics.ExtensionFailures.WithLabelValues(x.cfg.Name, hook, reason).Inc()
	if suppressed, ok := x.warned.allow(time.Now()); ok {
		if err != nil {
			args = append(args, "err", err)
		}
		if suppressed > 0 {
			args = append(args, "suppressedSinceLast", suppressed)
		}
		x.log.Warn("extension: "+msg, append([]any{"hook", hook, "reason", reason}, args...)...)
	}
}

// enqueue queues an observation for the worker, or drops and counts it
// when the queue is full (or the Set closed).
func (x *ext) enqueue(d delivery) {
	if !x.set.closed.Load() {
		select {
		case x.queue <- d:
			return
		default:
		}
	}
	x.drops[d.hook].Inc()
	if suppressed, ok := x.warned.allow(time.Now()); ok {
		x.log.Warn("extension: queue full; delivery dropped", "hook", d.hook, "queueSize", x.cfg.QueueSize, "suppressedSinceLast", suppressed)
	}
}

// work sends the queued observations in order until stop, then what is
// still queued without waiting for more chunks (see Close).
func (x *ext) work() {
	defer close(x.done)
	var next *delivery
	draining := false
	for {
		var d delivery
		switch {
		case next != nil:
			d, next = *next, nil
		case draining:
			select {
			case d = <-x.queue:
			default:
				return
			}
		default:
			select {
			case d = <-x.queue:
			case <-x.stop:
				draining = true
				continue
			}
		}
		next = x.send(d, !draining)
	}
}

// send sends d, batched with the chunks that follow it for onChunk; it
// returns the queued delivery that ended a batch, if any, to send next.
func (x *ext) send(d delivery, wait bool) *delivery {
	if d.hook == HookOnChunk {
		return x.sendChunks(d, wait)
	}
	x.deliver(d.ctx, d.hook, &d.identity, d.snapshot, nil)
	return nil
}

// sendChunks sends a batch starting with first: it collects the same
// turn's chunks that follow in the queue (waiting up to
// ChunkBatchInterval when wait is set) and returns the delivery that ended
// the batch, if any, for the caller to handle next.
func (x *ext) sendChunks(first delivery, wait bool) (next *delivery) {
	batch := []ChunkSnapshot{first.snapshot.(ChunkSnapshot)}
	var timeout <-chan time.Time
	if wait {
		timer := time.NewTimer(ChunkBatchInterval)
		defer timer.Stop()
		timeout = timer.C
	}
collect:
	for len(batch) < ChunkBatchMax {
		var d delivery
		if wait {
			select {
			case d = <-x.queue:
			case <-timeout:
				break collect
			case <-x.stop:
				break collect
			}
		} else {
			select {
			case d = <-x.queue:
			default:
				break collect
			}
		}
		if d.hook != HookOnChunk || d.identity.RequestID != first.identity.RequestID {
			next = &d
			break
		}
		batch = append(batch, d.snapshot.(ChunkSnapshot))
	}
	x.deliver(first.ctx, HookOnChunk, &first.identity, nil, batch)
	return next
}

// Wrap returns hooks that run rules (the rule revision's hooks) and then
// dispatch to the subscribed extensions. Without extensions it returns
// rules itself.
func (s *Set) Wrap(rules engine.Hooks) engine.Hooks {
	if s == nil || len(s.exts) == 0 {
		return rules
	}
	return &hooks{Hooks: rules, set: s}
}

// hooks dispatches to the extensions after the rules' hooks.
type hooks struct {
	engine.Hooks
	set *Set
}

// BeforeTurn runs the rules, then each subscribed extension in order,
// each waited for at most its timeout. An extension's result applies on
// top of the rules' (and earlier extensions') result, never loosening a
// restriction (celrules.ApplyExternal); a failing extension changes
// nothing. Later extensions see the system prompt and tools earlier ones
// chose.
func (h *hooks) BeforeTurn(ctx context.Context, tc *engine.TurnContext) (*engine.TurnConfig, error) {
	cfg, err := h.Hooks.BeforeTurn(ctx, tc)
	if err != nil {
		return nil, err
	}
	var snap *BeforeTurnSnapshot
	out := cfg
	for _, x := range h.set.exts {
		if !x.subscribed(HookBeforeTurn, tc.Agent) {
			continue
		}
		if snap == nil {
			s := beforeTurnSnapshot(tc, cfg)
			snap = &s
		}
		r := x.deliver(ctx, HookBeforeTurn, &tc.Identity, snap, nil)
		if r == nil || r.Skipped || len(r.Result) == 0 {
			continue
		}
		fields, errs := overrides(r.Result)
		next := new(engine.TurnConfig)
		if out != nil {
			*next = *out
		}
		errs = append(errs, celrules.ApplyExternal(next, fields)...)
		for _, e := range errs {
			x.fail(HookBeforeTurn, reasonInvalid, "result field not applied", e)
		}
		out = next
		snap.see(out)
	}
	return out, nil
}

func (h *hooks) BeforeToolCall(ctx context.Context, tc *engine.ToolCallContext) (*engine.ToolCallDecision, error) {
	d, err := h.Hooks.BeforeToolCall(ctx, tc)
	h.set.observe(ctx, HookBeforeToolCall, &tc.Identity, func() any { return toolCallSnapshot(tc) })
	return d, err
}

func (h *hooks) AfterToolCall(ctx context.Context, rc *engine.ToolCallResultContext) {
	h.Hooks.AfterToolCall(ctx, rc)
	h.set.observe(ctx, HookAfterToolCall, &rc.Identity, func() any { return toolResultSnapshot(rc) })
}

func (h *hooks) OnStepFinish(ctx context.Context, r *engine.StepResult) {
	h.Hooks.OnStepFinish(ctx, r)
	h.set.observe(ctx, HookOnStepFinish, &r.Identity, func() any { return stepSnapshot(r) })
}

func (h *hooks) OnChunk(ctx context.Context, c *engine.ChunkContext) {
	h.Hooks.OnChunk(ctx, c)
	h.set.observe(ctx, HookOnChunk, &c.Identity, func() any { return chunkSnapshot(&c.Chunk) })
}

// observe queues an observation for every extension subscribed to hook
// for the turn's agent; snapshot is built once, only if one is.
func (s *Set) observe(ctx context.Context, hook string, id *engine.Identity, snapshot func() any) {
	var snap any
	for _, x := range s.exts {
		if !x.subscribed(hook, id.Agent) {
			continue
		}
		if snap == nil {
			snap = snapshot()
		}
		x.enqueue(delivery{hook: hook, identity: *id, snapshot: snap, ctx: tracing.Follow(x.ctx, ctx)})
	}
}

// throttle lets one log line through per throttleEvery and counts the
// others, so a dead extension on a busy gateway does not flood the log.
type throttle struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

const throttleEvery = time.Second

func (t *throttle) allow(now time.Time) (suppressed int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.last.IsZero() && now.Sub(t.last) < throttleEvery {
		t.suppressed++
		return 0, false
	}
	suppressed, t.suppressed, t.last = t.suppressed, 0, now
	return suppressed, true
}
