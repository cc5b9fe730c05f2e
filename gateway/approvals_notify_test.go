package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/extension"
	"github.com/turngate/turngate/gateway/notify"
)

// TestApprovalWebhooks: the approver's system receives, signed, each
// approval's request (its first answer, a 500, is retried), decision and
// expiry; each delivery is in the audit log.
func TestApprovalWebhooks(t *testing.T) {
	const secret = "approvals-webhook-secret-0001"
	var (
		mu     sync.Mutex
		events []notify.Event
		failed bool
	)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := extension.Verify([]byte(secret), r.Header.Get(extension.SignatureHeader), body, time.Now(), extension.DefaultTolerance); err != nil {
			t.Errorf("unsigned notification: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !failed { // the first delivery fails once
			failed = true
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var ev notify.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("notification body %s: %v", body, err)
		}
		events = append(events, ev)
	}))
	t.Cleanup(rcv.Close)
	cfg := testConfig(t, "approval")
	withApprovalKeys(cfg)
	cfg.ApprovalWebhooks = []config.ApprovalWebhook{{URL: rcv.URL, Secret: secret, Tenants: []string{"acme"},
		Events: config.ApprovalEvents, Timeout: 5 * time.Second, AllowPrivate: true}}
	g := startGateway(t, cfg, Options{NotifyRetryBase: time.Millisecond})
	received := func(n int) []notify.Event {
		t.Helper()
		waitFor(t, "notifications", func() bool { mu.Lock(); defer mu.Unlock(); return len(events) >= n })
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events)
	}

	chunks, _ := askApproval(t, g, "hook-1", "/big/db", bearer(userKey)...)
	id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	ev := received(1)[0]
	if ev.Type != notify.TypeRequested || ev.Approval.ID != id || ev.Approval.State != "pending" || ev.Approval.Tenant != "acme" ||
		!slices.Equal(ev.Approval.Approvers, []string{"role:ops"}) || ev.ID == "" {
		t.Errorf("requested event %+v", ev)
	}
	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true, "reason": "ticket 42"}, http.StatusOK, nil, bearer(opsKey)...)
	if ev := received(2)[1]; ev.Type != notify.TypeDecided || ev.Approval.State != "approved" || ev.Approval.DecidedBy != "olga" ||
		ev.Approval.Reason != "ticket 42" || ev.Approval.DecidedAt == nil {
		t.Errorf("decided event %+v", ev)
	}

	chunks, _ = askApproval(t, g, "hook-2", "/big/db", bearer(userKey)...)
	id2 := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	received(3)
	g.srv.expireApprovals(context.Background(), time.Now().Add(2*g.cfg.Limits.ApprovalExpiry))
	if ev := received(4)[3]; ev.Type != notify.TypeExpired || ev.Approval.ID != id2 || ev.Approval.State != "expired" {
		t.Errorf("expired event %+v", ev)
	}

	// Each delivery's outcome is audited (after the receiver answered).
	var delivered, retried int
	waitFor(t, "notification records", func() bool {
		g.srv.audit.Flush()
		delivered, retried = 0, 0
		for _, line := range strings.Split(g.auditLog(), "\n") {
			var rec struct {
				Kind, Outcome string
				Attempts      int
			}
			if json.Unmarshal([]byte(line), &rec) != nil || rec.Kind != "notification" {
				continue
			}
			if rec.Outcome == notify.OutcomeDelivered {
				delivered++
			}
			if rec.Attempts == 2 {
				retried++
			}
		}
		return delivered >= 4
	})
	if retried != 1 {
		t.Errorf("audit: %d deliveries after a retry, want 1", retried)
	}
}
