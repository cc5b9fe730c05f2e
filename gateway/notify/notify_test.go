package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/extension"
)

const secret = "a-webhook-secret-of-some-length"

// receiver is an approver's system at the edge of the world: it verifies
// every request's signature and answers with the statuses it is given, in
// order (then 200).
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []int
	events   []Event
	bad      []string
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := extension.Verify([]byte(secret), req.Header.Get(extension.SignatureHeader), body, time.Now(), extension.DefaultTolerance); err != nil {
			r.bad = append(r.bad, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev Event
		if err := json.Unmarshal(body, &ev); err != nil {
			r.bad = append(r.bad, err.Error())
		}
		r.events = append(r.events, ev)
		status := http.StatusOK
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// reports collects a notifier's reports.
type reports struct {
	mu  sync.Mutex
	got []Report
	ch  chan Report
}

func (r *reports) add(x Report) {
	r.mu.Lock()
	r.got = append(r.got, x)
	r.mu.Unlock()
	r.ch <- x
}

func start(t *testing.T, hooks ...config.ApprovalWebhook) (*Notifier, *reports) {
	rs := &reports{ch: make(chan Report, 16)}
	n := New(Options{Webhooks: hooks, Report: rs.add, RetryBase: time.Millisecond, MaxAttempts: 3})
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n, rs
}

func hook(url string, mods ...func(*config.ApprovalWebhook)) config.ApprovalWebhook {
	w := config.ApprovalWebhook{URL: url, Secret: secret, Events: config.ApprovalEvents, Timeout: 5 * time.Second, AllowPrivate: true}
	for _, m := range mods {
		m(&w)
	}
	return w
}

func event(typ, tenant, agent string) Event {
	return Event{Type: typ, Time: time.Unix(0, 0).UTC(), Approval: Approval{ID: "apr_1", Tenant: tenant, Agent: agent, SessionID: "s1",
		ToolCallID: "c1", ToolName: "delete", State: "pending"}}
}

func next(t *testing.T, rs *reports) Report {
	t.Helper()
	select {
	case r := <-rs.ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery report")
	}
	return Report{}
}

func TestDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		mod      func(*config.ApprovalWebhook)
		outcome  string
		attempts int
		received int
	}{
		{"signed and delivered", nil, nil, OutcomeDelivered, 1, 1},
		{"retried after a 500", []int{500}, nil, OutcomeDelivered, 2, 2},
		{"retried after a 429", []int{429, 503}, nil, OutcomeDelivered, 3, 3},
		{"given up after the attempts", []int{500, 500, 500}, nil, OutcomeFailed, 3, 3},
		{"a 400 is not retried", []int{400}, nil, OutcomeFailed, 1, 1},
		{"a private address needs allowPrivate", nil, func(w *config.ApprovalWebhook) { w.AllowPrivate = false }, OutcomeFailed, 1, 0},
		{"a wrong secret is refused by the receiver", nil, func(w *config.ApprovalWebhook) { w.Secret = "another-secret-entirely" }, OutcomeFailed, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.statuses...)
			mods := []func(*config.ApprovalWebhook){}
			if tc.mod != nil {
				mods = append(mods, tc.mod)
			}
			n, rs := start(t, hook(rcv.URL, mods...))
			n.Approval(event(TypeRequested, "acme", "demo"))
			r := next(t, rs)
			if r.Outcome != tc.outcome || r.Attempts != tc.attempts || r.EventID == "" || r.ApprovalID != "apr_1" {
				t.Errorf("report %+v, want %s after %d attempts", r, tc.outcome, tc.attempts)
			}
			rcv.mu.Lock()
			defer rcv.mu.Unlock()
			if len(rcv.events) != tc.received {
				t.Errorf("receiver verified %d requests, want %d (refused: %v)", len(rcv.events), tc.received, rcv.bad)
			}
			for _, ev := range rcv.events {
				if ev.ID != r.EventID || ev.Type != TypeRequested || ev.Approval.ToolName != "delete" {
					t.Errorf("received %+v, want the event with id %s", ev, r.EventID)
				}
			}
		})
	}
}

// A webhook gets only the events, agents and tenants it names.
func TestSubscriptions(t *testing.T) {
	rcv := newReceiver(t)
	n, rs := start(t, hook(rcv.URL, func(w *config.ApprovalWebhook) {
		w.Tenants, w.Agents, w.Events = []string{"acme"}, []string{"demo"}, []string{config.ApprovalEventExpired}
	}))
	n.Approval(event(TypeExpired, "globex", "demo"))
	n.Approval(event(TypeExpired, "acme", "other"))
	n.Approval(event(TypeRequested, "acme", "demo"))
	n.Approval(event(TypeExpired, "acme", "demo"))
	if r := next(t, rs); r.Type != TypeExpired || r.Tenant != "acme" || r.Outcome != OutcomeDelivered {
		t.Errorf("report %+v, want acme's expiry delivered", r)
	}
	_ = n.Close(context.Background())
	if len(rs.got) != 1 {
		t.Errorf("reports %+v, want one", rs.got)
	}
}

// A full queue drops the event, reported, without blocking the caller.
func TestFullQueueDrops(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	rs := &reports{ch: make(chan Report, 16)}
	n := New(Options{Webhooks: []config.ApprovalWebhook{hook(srv.URL)}, Report: rs.add, QueueSize: 1})
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	for range 3 { // one in flight, one queued, one dropped (at least)
		n.Approval(event(TypeRequested, "acme", "demo"))
	}
	if r := next(t, rs); r.Outcome != OutcomeDropped {
		t.Errorf("report %+v, want a dropped event", r)
	}
}
