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

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
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
