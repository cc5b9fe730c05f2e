package gateway

import (
	"context"
	"net/http"
	"testing"

	"github.com/turngate/turngate/gateway/store"
)

// heldDecisions is a PostgreSQL store whose decision writes, once the
// first has signalled entered, wait until release is closed.
type heldDecisions struct {
	*store.Postgres
	entered, release chan struct{}
}

func (h *heldDecisions) InsertDecisions(ctx context.Context, rows []store.DecisionRow) error {
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-h.release
	return h.Postgres.InsertDecisions(ctx, rows)
}

// TestErasedDecisionsOnEveryReplica: replica b runs the last turns of s1
// and s2, and its decision writer still holds their records (s1's being
// written, s2's queued behind) when replica a erases both sessions; once
// b's writes go through, the decision store holds no record of either,
// and a third session's records, queued on b too, are stored.
func TestErasedDecisionsOnEveryReplica(t *testing.T) {
	pg := onPostgres(t)
	var gs [2]*testGateway
	held := &heldDecisions{entered: make(chan struct{}, 1), release: make(chan struct{})}
	for i, id := range []string{"replica-a", "replica-b"} {
		cfg := testConfig(t, "empty")
		pg(cfg)
		cfg.Replica.ID = id
		var opts Options
		if i == 1 {
			held.Postgres = openTestStore(t, cfg).(*store.Postgres)
			opts.Store = held
		}
		gs[i] = startGateway(t, cfg, opts)
	}
	a, b := gs[0], gs[1]
	chat := func(session string) {
		t.Helper()
		readUIStream(t, b.do("POST", "/v1/agents/demo/chat", chatBody(session, "u1", "hello "+session)))
		waitReleased(t, b, session)
	}
	chat("s1")
	<-held.entered // s1's records are being written
	chat("s2")
	chat("keep")
	pending := b.srv.decisions.Pending() // s1's, s2's and keep's, as many each
	for _, s := range []string{"s1", "s2"} {
		a.doJSON("DELETE", "/v1/agents/demo/sessions/"+s, nil, http.StatusOK, nil)
	}
	// b hears of s2's erasure after s1's: s2's records leave its queue.
	waitFor(t, "b to drop s2's queued records", func() bool { return b.srv.decisions.Pending() == 2*pending/3 })
	close(held.release)
	if err := b.srv.storeQueuedDecisions(context.Background()); err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{"s1": false, "s2": false, "keep": true} {
		rows, err := a.store.QueryDecisions(context.Background(), store.DecisionQuery{Tenant: "default", SessionID: s, Limit: store.MaxDecisionPage})
		if err != nil {
			t.Fatal(err)
		}
		if (len(rows) > 0) != want {
			t.Errorf("the decision store holds %d records of %s after the erasures of s1 and s2", len(rows), s)
		}
	}
}
