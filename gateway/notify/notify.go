// Package notify tells approvers' systems about approvals: a webhook per
// agent or tenant receives a signed JSON POST when an approval is
// requested, decided or expired.
//
// Deliveries are asynchronous: Approval only queues the event (a bounded
// queue; a full queue drops the event, audited), and a worker per webhook
// POSTs it, signed like extension calls (extension.Sign, header
// X-Turngate-Signature), retrying a failed attempt (a transport error, a
// 5xx or a 429) with exponential backoff up to MaxAttempts. Each event's
// outcome — delivered, failed after its attempts, dropped — is reported to
// Options.Report (the gateway writes it to the audit log).
//
// Durability: the queue lives in memory. An event not yet delivered when
// the gateway stops is lost (Close waits for the worker only until its
// context ends); the approval itself is in the store, so an approver's
// system that starts after an outage reconciles with GET
// /v1/approvals?state=pending. Receivers deduplicate on the event id: a
// delivery whose answer was lost is sent again.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/extension"
	"github.com/turngate/turngate/internal/netguard"
)

// Event types, as the payload's type.
const (
	TypeRequested = "approval.requested"
	TypeDecided   = "approval.decided"
	TypeExpired   = "approval.expired"
)

// Event is one notification's JSON body. It carries no tool input: the
// receiver reads what it needs through the approvals API, with its own
// key.
type Event struct {
	// ID identifies the event across retries (deduplicate on it).
	ID       string    `json:"id"`
	Type     string    `json:"type"`
	Time     time.Time `json:"time"`
	Approval Approval  `json:"approval"`
}

// Approval is the approval an event is about.
type Approval struct {
	ID          string     `json:"id"`
	Tenant      string     `json:"tenant"`
	Agent       string     `json:"agent"`
	SessionID   string     `json:"sessionId"`
	RequestID   string     `json:"requestId,omitempty"`
	ToolCallID  string     `json:"toolCallId"`
	ToolName    string     `json:"toolName"`
	Approvers   []string   `json:"approvers,omitempty"`
	State       string     `json:"state"`
	DecidedBy   string     `json:"decidedBy,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	RequestedAt time.Time  `json:"requestedAt"`
	ExpiresAt   time.Time  `json:"expiresAt"`
	DecidedAt   *time.Time `json:"decidedAt,omitempty"`
}

// Outcomes of one event's delivery.
const (
	OutcomeDelivered = "delivered"
	OutcomeFailed    = "failed"
	OutcomeDropped   = "dropped"
)

// Report is the outcome of one event's delivery to one webhook.
type Report struct {
	EventID    string
	Type       string
	ApprovalID string
	Tenant     string
	// URL is the webhook's URL.
	URL      string
	Outcome  string
	Attempts int
	// Status is the last answer's HTTP status (0: none).
	Status int
	// Error says why the last attempt failed.
	Error string
}

// Defaults.
const (
	DefaultMaxAttempts = 6
	DefaultRetryBase   = time.Second
	// DefaultQueueSize bounds the events waiting for one webhook.
	DefaultQueueSize = 1024
	// maxBackoff caps the wait between two attempts.
	maxBackoff = time.Minute
)

// Options configure a Notifier.
type Options struct {
	Webhooks []config.ApprovalWebhook
	// Report receives every event's outcome (nil: none).
	Report func(Report)
	Logger *slog.Logger
	// MaxAttempts, RetryBase and QueueSize default to DefaultMaxAttempts,
	// DefaultRetryBase and DefaultQueueSize. Attempt n waits RetryBase ×
	// 2ⁿ⁻² (capped at a minute) after the one before.
	MaxAttempts int
	RetryBase   time.Duration
	QueueSize   int
	// Now is the signing clock (nil: time.Now).
	Now func() time.Time
}

// Notifier delivers approval events to the configured webhooks.
type Notifier struct {
	opts  Options
	hooks []*webhook
	wg    sync.WaitGroup
	stop  context.CancelFunc
	ctx   context.Context
	once  sync.Once
}

// webhook is one configured URL and its queue.
type webhook struct {
	cfg    config.ApprovalWebhook
	client *http.Client
	queue  chan Event
}

// New starts a worker per webhook; Close stops them.
func New(opts Options) *Notifier {
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = DefaultRetryBase
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Report == nil {
		opts.Report = func(Report) {}
	}
	n := &Notifier{opts: opts}
	n.ctx, n.stop = context.WithCancel(context.Background())
	for _, cfg := range opts.Webhooks {
		w := &webhook{cfg: cfg, client: newClient(cfg), queue: make(chan Event, opts.QueueSize)}
		n.hooks = append(n.hooks, w)
		n.wg.Add(1)
		go n.run(w)
	}
	return n
}

// newClient is a webhook's HTTP client: no redirects (a signed delivery
// goes to the configured URL only), no proxy, and unless AllowPrivate a
// dial-time check of the address (netguard.Control), so DNS rebinding
// cannot turn it toward a private host.
func newClient(cfg config.ApprovalWebhook) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	if !cfg.AllowPrivate {
		dialer.Control = netguard.Control
	}
	return &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
			TLSHandshakeTimeout: cfg.Timeout, MaxIdleConnsPerHost: 2},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Approval queues ev for every webhook whose agents, tenants and events
// take it. It never blocks: a full queue drops the event (reported).
func (n *Notifier) Approval(ev Event) {
	if n == nil {
		return
	}
	if ev.ID == "" {
		ev.ID = "evt_" + uuid.NewString()
	}
	for _, w := range n.hooks {
		if !w.wants(ev) {
			continue
		}
		select {
		case w.queue <- ev:
		default:
			n.report(w, ev, OutcomeDropped, 0, 0, "the webhook's queue is full")
		}
	}
}

// wants reports whether the webhook subscribes to ev.
func (w *webhook) wants(ev Event) bool {
	event := map[string]string{TypeRequested: config.ApprovalEventRequested, TypeDecided: config.ApprovalEventDecided,
		TypeExpired: config.ApprovalEventExpired}[ev.Type]
	return slices.Contains(w.cfg.Events, event) &&
		(len(w.cfg.Agents) == 0 || slices.Contains(w.cfg.Agents, ev.Approval.Agent)) &&
		(len(w.cfg.Tenants) == 0 || slices.Contains(w.cfg.Tenants, ev.Approval.Tenant))
}

// run delivers a webhook's events in order until Close.
func (n *Notifier) run(w *webhook) {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case ev := <-w.queue:
			n.deliver(w, ev)
		}
	}
}

// deliver POSTs ev until an attempt succeeds, one fails for good (a 4xx
// other than 408 and 429), the attempts run out or Close is called.
func (n *Notifier) deliver(w *webhook, ev Event) {
	body, err := json.Marshal(ev)
	if err != nil {
		n.report(w, ev, OutcomeFailed, 0, 0, err.Error())
		return
	}
	var status int
	for attempt := 1; ; attempt++ {
		var retry bool
		status, retry, err = n.attempt(w, body)
		switch {
		case err == nil:
			n.report(w, ev, OutcomeDelivered, attempt, status, "")
			return
		case !retry || attempt >= n.opts.MaxAttempts:
			n.report(w, ev, OutcomeFailed, attempt, status, err.Error())
			return
		}
		wait := min(n.opts.RetryBase<<(attempt-1), maxBackoff)
		select {
		case <-n.ctx.Done():
			n.report(w, ev, OutcomeFailed, attempt, status, "the gateway stopped before the next attempt: "+err.Error())
			return
		case <-time.After(wait):
		}
	}
}

// attempt makes one signed POST; retry says whether a failure may pass.
func (n *Notifier) attempt(w *webhook, body []byte) (status int, retry bool, err error) {
	ctx, cancel := context.WithTimeout(n.ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "turngate-approvals")
	req.Header.Set(extension.SignatureHeader, extension.Sign([]byte(w.cfg.Secret), n.opts.Now(), body))
	resp, err := w.client.Do(req)
	if err != nil {
		if errors.Is(err, netguard.ErrRefused) {
			return 0, false, fmt.Errorf("the webhook's address is private (set allowPrivate to allow it): %w", err)
		}
		return 0, true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, false, nil
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout:
		return resp.StatusCode, true, errors.New("the webhook answered " + strconv.Itoa(resp.StatusCode))
	}
	return resp.StatusCode, false, errors.New("the webhook answered " + strconv.Itoa(resp.StatusCode))
}

func (n *Notifier) report(w *webhook, ev Event, outcome string, attempts, status int, why string) {
	r := Report{EventID: ev.ID, Type: ev.Type, ApprovalID: ev.Approval.ID, Tenant: ev.Approval.Tenant, URL: w.cfg.URL,
		Outcome: outcome, Attempts: attempts, Status: status, Error: why}
	if outcome != OutcomeDelivered {
		n.opts.Logger.Warn("approval notification not delivered", "event", ev.Type, "approval", ev.Approval.ID,
			"url", w.cfg.URL, "outcome", outcome, "attempts", attempts, "err", why)
	}
	n.opts.Report(r)
}

// Close stops the workers: a delivery under way ends with its attempt,
// queued events are lost (see the package doc). It waits for the workers
// while ctx lasts.
func (n *Notifier) Close(ctx context.Context) error {
	if n == nil {
		return nil
	}
	n.once.Do(n.stop)
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
