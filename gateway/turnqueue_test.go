package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
)

// waitingOn returns how many requests wait on g, in the database queue,
// for the anonymous tenant's session.
func waitingOn(g *testGateway, session string) int {
	tq := g.srv.rep.waiters
	tq.mu.Lock()
	defer tq.mu.Unlock()
	return len(tq.waiting[sessionKey("default", session)])
}

// waitQueued waits until want requests wait for session s1 on a and b
// together.
func waitQueued(t *testing.T, want int, a, b *testGateway) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d requests to queue", want), func() bool { return waitingOn(a, "s1")+waitingOn(b, "s1") == want })
}

// send posts text to session s1 on g in a goroutine; wait returns the
// response's status.
func send(g *testGateway, text string) (wait func() int) {
	resp := goDo(g, "POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": text})
	return func() int {
		r := resp()
		r.Body.Close()
		return r.StatusCode
	}
}

// userTexts returns the texts of session s1's user messages, in order.
func userTexts(g *testGateway) []string {
	var out []string
	for _, m := range g.history("demo", "s1") {
		if m.Role == engine.RoleUser {
			out = append(out, textOf(m))
		}
	}
	return out
}

// assertTooMany checks that one more request for s1 on g is refused with
// 429 too_many_queued_turns and Retry-After: 1.
func assertTooMany(t *testing.T, g *testGateway) {
	t.Helper()
	resp := g.do("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "one too many"})
	defer resp.Body.Close()
	var e struct{ Code string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusTooManyRequests || e.Code != CodeTooManyQueued || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("%s: a request beyond the queue: %d %q (Retry-After %q), want 429 %s, Retry-After 1",
			g.cfg.Replica.ID, resp.StatusCode, e.Code, resp.Header.Get("Retry-After"), CodeTooManyQueued)
	}
}

// queueBound sets limits.maxQueuedTurnsPerSession.
func queueBound(n int) func(*config.Config) {
	return func(cfg *config.Config) { cfg.Limits.MaxQueuedTurnsPerSession = n }
}

// TestTurnQueueBoundAcrossReplicas: with a turn running on a and the
// bound's waiters split over a and b, the next request on either replica
// is 429 with Retry-After; the waiters then run.
func TestTurnQueueBoundAcrossReplicas(t *testing.T) {
	gate := newStepGate(false)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil}, queueBound(2))
	first := send(a, "first")
	<-gate.entered
	onA := send(a, "waits on a")
	waitQueued(t, 1, a, b)
	onB := send(b, "waits on b")
	waitQueued(t, 2, a, b)
	assertTooMany(t, a)
	assertTooMany(t, b)
	close(gate.open)
	for name, wait := range map[string]func() int{"first": first, "a's waiter": onA, "b's waiter": onB} {
		if code := wait(); code != http.StatusOK {
			t.Errorf("%s: status %d, want 200", name, code)
		}
	}
	if got, want := userTexts(a), "first|waits on a|waits on b"; strings.Join(got, "|") != want {
		t.Errorf("user messages %q, want %s", got, want)
	}
}

// TestTurnQueueOrderAcrossReplicas: waiters registered alternately on b and
// a run in the order they registered, which the order of their user
// messages in the transcript shows.
func TestTurnQueueOrderAcrossReplicas(t *testing.T) {
	gate := newStepGate(false)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil}, queueBound(4))
	waits := []func() int{send(a, "first")}
	<-gate.entered
	want := []string{"first"}
	for i, g := range []*testGateway{b, a, b, a} {
		text := fmt.Sprintf("waiter %d on %s", i+1, g.cfg.Replica.ID)
		waits = append(waits, send(g, text))
		waitQueued(t, i+1, a, b)
		want = append(want, text)
	}
	close(gate.open)
	for i, wait := range waits {
		if code := wait(); code != http.StatusOK {
			t.Errorf("request %d: status %d, want 200", i, code)
		}
	}
	if got := userTexts(b); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("user messages in the order\n%q\nwant the order of registration\n%q", got, want)
	}
}

// TestTurnQueueWakeOnRelease: a waiter on b starts as soon as the turn on a
// releases the lease, woken by the release's notification rather than its
// polling; the test logs the delay it measures.
func TestTurnQueueWakeOnRelease(t *testing.T) {
	gate := newStepGate(false)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
	// A listener of the test's own timestamps the release's notification.
	st, err := store.OpenPostgres(context.Background(), a.cfg.Store.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	released := make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan struct{})
	listened := make(chan error, 1)
	go func() {
		listened <- st.Listen(ctx, func() { close(listening) }, func(n store.Notification) {
			if n.Channel == store.ChannelLease {
				select {
				case released <- time.Now():
				default:
				}
			}
		})
	}()
	defer func() { cancel(); <-listened }()
	<-listening

	first := send(a, "first")
	<-gate.entered
	started := make(chan time.Time, 1)
	go func() {
		resp := b.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u2", "second"))
		started <- time.Now() // the headers: b's turn runs
		goRead(resp)()
	}()
	waitQueued(t, 1, a, b)
	close(gate.open)
	if code := first(); code != http.StatusOK {
		t.Errorf("first: status %d", code)
	}
	t0, t1 := <-released, <-started
	t.Logf("release notified → b's turn streaming: %v (polling fallback every %v)", t1.Sub(t0), leasePoll)
}

// TestTurnQueueDeadReplica: the waiters of a replica that died (its places
// are never renewed nor removed, as kill -9 leaves them) count against the
// bound and hold up those behind them only until their places expire.
func TestTurnQueueDeadReplica(t *testing.T) {
	gate := newStepGate(false)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil}, queueBound(2))
	dead, ok := openTestStore(t, a.cfg).(*store.Postgres)
	if !ok {
		t.Fatal("not a PostgreSQL store")
	}
	defer dead.Close()
	first := send(a, "first")
	<-gate.entered
	const ttl = time.Second
	if _, err := dead.Enqueue(context.Background(), "default", "s1", "replica-dead", true, 2, ttl); err != nil {
		t.Fatal(err)
	}
	onB := send(b, "behind the dead one")
	waitQueued(t, 1, a, b)
	assertTooMany(t, a) // the dead waiter counts while its place lives
	close(gate.open)
	if code := first(); code != http.StatusOK {
		t.Errorf("first: status %d", code)
	}
	if code := onB(); code != http.StatusOK {
		t.Errorf("the waiter behind the dead one: status %d, want 200 once its place expired", code)
	}
	if got, want := userTexts(a), "first|behind the dead one"; strings.Join(got, "|") != want {
		t.Errorf("user messages %q, want %s", got, want)
	}
}

// TestTurnQueueCancelledWaiterLeaves: a waiter whose client goes away
// leaves the queue at once: its place no longer counts and its message is
// never stored.
func TestTurnQueueCancelledWaiterLeaves(t *testing.T) {
	gate := newStepGate(false)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil}, queueBound(1))
	first := send(a, "first")
	<-gate.entered
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", b.http.URL+"/v1/agents/demo/sessions/s1/messages",
			strings.NewReader(`{"text": "gone"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	waitQueued(t, 1, a, b)
	assertTooMany(t, a)
	cancel()
	if err := <-gone; err == nil {
		t.Error("the cancelled request got an answer")
	}
	waitQueued(t, 0, a, b)
	after := send(a, "after")
	waitQueued(t, 1, a, b)
	close(gate.open)
	for name, wait := range map[string]func() int{"first": first, "after": after} {
		if code := wait(); code != http.StatusOK {
			t.Errorf("%s: status %d, want 200", name, code)
		}
	}
	if got, want := userTexts(a), "first|after"; strings.Join(got, "|") != want {
		t.Errorf("user messages %q, want %s", got, want)
	}
}
