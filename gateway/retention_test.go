package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/erasure"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/gateway/store/storefault"
)

// TestRetention: with retention.tenants.acme 30d, a sweep 30 days after
// acme's active session was last written erases acme's session idle
// longer (gone from the store, a tombstone of reason retention, the chain
// verifies, turngate_sessions_pruned_total counts it), keeps the active
// one and globex's older one (globex has no retention); a second sweep,
// as another replica's would, erases nothing more. Both drivers.
func TestRetention(t *testing.T) {
	forEachDriver(t, func(t *testing.T, mod func(*config.Config)) {
		g := newTestGateway(t, "empty", mod, withApprovalKeys, func(c *config.Config) {
			c.Retention.Tenants = map[string]string{"acme": "30d"}
		})
		alice, mallory := bearer(userKey), bearer(otherKey)
		readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("g-old", "u1", "hi"), mallory...))
		readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("old", "u2", "hi"), alice...))
		readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("active", "u3", "hi"), alice...))

		ctx := context.Background()
		acme, err := g.store.ListSessions(ctx, "acme", "demo", "", 10)
		if err != nil || len(acme) != 2 || acme[0].ID != "active" || !acme[1].UpdatedAt.Before(acme[0].UpdatedAt) {
			t.Fatalf("acme's sessions = %+v, %v; want old written before active", acme, err)
		}
		sweep := *g.srv.retention
		sweep.Now = func() time.Time { return acme[0].UpdatedAt.Add(30 * 24 * time.Hour) }
		if n, err := sweep.Sweep(ctx); n != 1 || err != nil {
			t.Fatalf("sweep erased %d sessions (%v), want 1", n, err)
		}
		if n, err := sweep.Sweep(ctx); n != 0 || err != nil {
			t.Errorf("a second sweep erased %d sessions (%v), want 0", n, err)
		}
		if _, err := g.store.ExportSession(ctx, "acme", "old"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the store still has the idle session: %v", err)
		}
		g.doJSON("GET", "/v1/agents/demo/sessions/old/messages", nil, http.StatusNotFound, nil, alice...)
		g.doJSON("GET", "/v1/agents/demo/sessions/active/messages", nil, http.StatusOK, nil, alice...)
		g.doJSON("GET", "/v1/agents/demo/sessions/g-old/messages", nil, http.StatusOK, nil, mallory...)
		if n := testutil.ToFloat64(g.srv.metrics.SessionsPruned.WithLabelValues("demo")); n != 1 {
			t.Errorf("turngate_sessions_pruned_total{agent=demo} = %v, want 1", n)
		}
		g.close()
		checkTombstone(t, g.audit.Bytes(), "old")
		if reasons := erasureReasons(g.audit.Bytes()); len(reasons) != 1 || reasons["old"] != audit.ErasureRetention {
			t.Errorf("erasure records %v, want one of old, reason retention", reasons)
		}
	})
}

// erasureReasons maps each session the audit log has an erasure record of
// to its reason.
func erasureReasons(log []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct{ Kind, SessionID, Reason string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Kind == audit.KindErasure {
			out[rec.SessionID] = rec.Reason
		}
	}
	return out
}

// TestRetentionTwoReplicas: with the demo agent's retention 30d, two
// replicas sweeping a month later erase the idle session once between
// them and keep the one whose turn runs on replica a, which the sweep
// after the turn ends erases.
func TestRetentionTwoReplicas(t *testing.T) {
	gate := newStepGate(true)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil}, func(c *config.Config) {
		for i := range c.Agents {
			if c.Agents[i].Name == "demo" {
				c.Agents[i].Retention = "30d"
			}
		}
	})
	readUIStream(t, b.do("POST", "/v1/agents/demo/chat", chatBody("idle", "u1", "hi")))
	respA := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("busy", "u2", "hello there"))
	<-gate.entered
	later := func(g *testGateway) *erasure.Retention {
		r := *g.srv.retention
		r.Now = func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }
		return &r
	}
	ctx := context.Background()
	na, errA := later(a).Sweep(ctx)
	nb, errB := later(b).Sweep(ctx)
	if na+nb != 1 || errA != nil || errB != nil {
		t.Fatalf("the replicas' sweeps erased %d and %d sessions (%v, %v), want 1 between them", na, nb, errA, errB)
	}
	if _, err := a.store.GetSession(ctx, "default", "busy"); err != nil {
		t.Errorf("the session whose turn runs was erased: %v", err)
	}
	close(gate.open)
	goRead(respA())()
	waitReleased(t, a, "busy")
	if n, err := later(b).Sweep(ctx); n != 1 || err != nil {
		t.Errorf("the sweep after the turn erased %d (%v), want 1", n, err)
	}
	for _, g := range []*testGateway{a, b} {
		g.doJSON("GET", "/v1/agents/demo/sessions/busy/messages", nil, http.StatusNotFound, nil)
		g.doJSON("GET", "/v1/agents/demo/sessions/idle/messages", nil, http.StatusNotFound, nil)
	}
}

// TestRetentionStoreOutage: a store that fails the erasure ends the sweep
// with the error, the session whole and no tombstone; the next sweep
// erases it.
func TestRetentionStoreOutage(t *testing.T) {
	cfg := testConfig(t, "empty")
	cfg.Retention.Tenants = map[string]string{config.DefaultTenant: "1h"}
	st, faults := storefault.Wrap(openTestStore(t, cfg))
	g := startGateway(t, cfg, Options{Store: st})
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hi")))
	sweep := *g.srv.retention
	sweep.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	faults.Fail("EraseSession", 1, 1, func(op string) error { return &store.UnavailableError{Op: op, Err: errors.New("connection refused")} })
	if n, err := sweep.Sweep(context.Background()); n != 0 || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("sweep during an outage = %d, %v; want 0 and the outage", n, err)
	}
	if msgs := g.history("demo", "s1"); len(msgs) != 2 {
		t.Errorf("after the failed sweep the session holds %d messages, want 2", len(msgs))
	}
	if len(erasureReasons(g.audit.Bytes())) != 0 {
		t.Error("a failed erasure wrote a tombstone")
	}
	if n, err := sweep.Sweep(context.Background()); n != 1 || err != nil {
		t.Errorf("the sweep after the outage erased %d (%v), want 1", n, err)
	}
}
