package gateway

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
)

func TestSubAgentTool(t *testing.T) {
	g := newTestGateway(t, "basic")
	var res turnResponse
	g.doJSON("POST", "/v1/agents/boss/sessions/s1/messages", map[string]any{"text": "delegate weather in Oslo"}, http.StatusOK, &res)
	text := textOf(res.Message)
	if res.Status != engine.StatusCompleted || !strings.Contains(text, "The sub-agent said: Here is the weather") || !strings.Contains(text, "Oslo") {
		t.Errorf("boss answered %q (%s)", text, res.Status)
	}
}

func TestTurnTimeoutAborts(t *testing.T) {
	cfg := testConfig(t, "basic")
	cfg.Limits.TurnTimeout = 100 * time.Millisecond
	g := startGateway(t, cfg, Options{})
	var res turnResponse
	g.doJSON("POST", "/v1/agents/slow/sessions/s1/messages", map[string]any{"text": "tell me a long story"}, http.StatusOK, &res)
	if res.Status != engine.StatusAborted {
		t.Fatalf("status %q, want aborted by the turn timeout", res.Status)
	}
	msgs := g.history("slow", "s1")
	if len(msgs) != 2 || msgs[1].ID != res.Message.ID {
		t.Errorf("the partial message was not persisted: %+v", msgs)
	}
}

func TestShutdownLetsTurnsFinish(t *testing.T) {
	g := newTestGateway(t, "basic")
	resp := g.do("POST", "/v1/agents/slow/chat", chatBody("s1", "u1", "tell me a long story"))
	br := bufio.NewReader(resp.Body)
	readUntil(t, br, `"text-delta"`)
	done := make(chan error, 1)
	srv, st := g.srv, g.store
	go func() { done <- srv.Shutdown(context.Background()) }()
	// New turns are refused while the running one finishes.
	waitFor(t, "shutdown to begin", srv.closing.Load)
	g.doJSON("POST", "/v1/agents/slow/sessions/s2/messages", map[string]any{"text": "late"}, http.StatusServiceUnavailable, nil)
	g.doJSON("GET", "/readyz", nil, http.StatusServiceUnavailable, nil)
	readUntil(t, br, `"finish"`)
	resp.Body.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	msgs, err := st.Messages(context.Background(), "default", "s1")
	if err != nil || len(msgs) != 2 || !strings.HasSuffix(textOf(msgs[1]), "nothing was ever lost.") {
		t.Errorf("the in-flight turn did not finish: %+v %v", msgs, err)
	}
}

func TestShutdownDeadlineAbortsTurns(t *testing.T) {
	g := newTestGateway(t, "basic")
	resp := g.do("POST", "/v1/agents/slow/chat", chatBody("s1", "u1", "tell me a long story"))
	defer resp.Body.Close()
	readUntil(t, bufio.NewReader(resp.Body), `"text-delta"`)
	st := g.store
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed: abort at once
	if err := g.srv.Shutdown(ctx); err == nil {
		t.Error("Shutdown past its deadline returned nil")
	}
	msgs, err := st.Messages(context.Background(), "default", "s1")
	if err != nil || len(msgs) != 2 || textOf(msgs[1]) == "" {
		t.Fatalf("no partial message after the aborting shutdown: %+v %v", msgs, err)
	}
	recs, _ := st.Turns(context.Background(), "default", "s1")
	if len(recs) != 1 || recs[0].Status != engine.StatusAborted {
		t.Errorf("turn records %+v, want one aborted", recs)
	}
	// The aborted turn's hook records are in the decision store too: the
	// writer outlives the turns it stores.
	rows, err := st.QueryDecisions(context.Background(), store.DecisionQuery{Tenant: "default", SessionID: "s1", Hook: "onChatResponse", Limit: 10})
	if err != nil || len(rows) != 1 {
		t.Errorf("the aborted turn's onChatResponse record in the decision store: %d rows, %v; want 1", len(rows), err)
	}
	g.srv = nil // already shut down
	g.http.Close()
	st.Close()
}
