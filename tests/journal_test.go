package tests

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// toolBackend is an HTTP tool served by a test: it records every call's
// Idempotency-Key and tool call id, and answers at once, or (when gated)
// only once the test opens it.
type toolBackend struct {
	URL   string
	mu    sync.Mutex
	calls []backendCall
	seen  chan backendCall
	open  chan struct{}
	once  sync.Once
}

// backendCall is one request a toolBackend received.
type backendCall struct {
	IdempotencyKey string
	ToolCallID     string
	Body           string
}

// startToolBackend serves a toolBackend until the test ends; gated makes
// calls wait for release.
func startToolBackend(t *testing.T, gated bool) *toolBackend {
	t.Helper()
	b := newToolBackend(gated)
	srv := httptest.NewServer(b)
	b.URL = srv.URL
	t.Cleanup(func() {
		b.release()
		srv.Close()
	})
	return b
}

// newToolBackend returns a toolBackend to serve; gated makes calls wait
// for release.
func newToolBackend(gated bool) *toolBackend {
	b := &toolBackend{seen: make(chan backendCall, 64), open: make(chan struct{})}
	if !gated {
		b.release()
	}
	return b
}

// ServeHTTP records the call and answers {"calls": n, "status": "done"},
// once the backend is open.
func (b *toolBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad input", http.StatusBadRequest)
		return
	}
	c := backendCall{IdempotencyKey: r.Header.Get("Idempotency-Key"), ToolCallID: r.Header.Get("X-Turngate-Tool-Call-Id"), Body: string(body)}
	b.mu.Lock()
	b.calls = append(b.calls, c)
	n := len(b.calls)
	b.mu.Unlock()
	select {
	case b.seen <- c:
	default:
	}
	select {
	case <-b.open:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"calls": n, "status": "done"})
	case <-r.Context().Done():
	}
}

// release lets waiting and later calls answer.
func (b *toolBackend) release() { b.once.Do(func() { close(b.open) }) }

// waitCall waits for the backend's next call.
func (b *toolBackend) waitCall(t *testing.T) backendCall {
	t.Helper()
	select {
	case c := <-b.seen:
		return c
	case <-time.After(pollTimeout):
		t.Fatalf("the tool backend was not called within %v", pollTimeout)
		return backendCall{}
	}
}

// received returns the calls so far.
func (b *toolBackend) received() []backendCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]backendCall(nil), b.calls...)
}

// usePostgres rewrites the store block of dir's turngate.yaml to
// store.driver: postgres with the DSN from TURNGATE_TEST_STORE_DSN, and
// returns the environment that sets it to a fresh schema of the tests'
// PostgreSQL database (see pgSchema), the schema and a connection.
func usePostgres(t *testing.T, dir string) (env []string, schema string, conn *pgx.Conn) {
	t.Helper()
	dsn, schema, conn := pgSchema(t)
	cfgPath := filepath.Join(dir, "turngate.yaml")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	const sqliteStore = "store:\n  driver: sqlite\n  path: data/turngate.db\n"
	if !strings.Contains(string(data), sqliteStore) {
		t.Fatalf("%s has no %q block to replace", cfgPath, sqliteStore)
	}
	cfg := strings.Replace(string(data), sqliteStore, "store:\n  driver: postgres\n  dsn: ${TURNGATE_TEST_STORE_DSN}\n", 1)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"TURNGATE_TEST_STORE_DSN=" + dsn}, schema, conn
}

// TestToolCallNotRepeatedAfterKill runs a submission whose turn calls the
// tally tool and then the slow one, kills the gateway with SIGKILL while
// the slow call waits (the tally call completed), and restarts it on the
// same store: the requeued submission completes, the tally backend saw one
// call (the re-run reused the journaled result), and the interrupted slow
// call was retried with the same Idempotency-Key. On both store drivers.
func TestToolCallNotRepeatedAfterKill(t *testing.T) {
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			dir := fixture(t, "journal")
			tally, slow := startToolBackend(t, false), startToolBackend(t, true)
			env := []string{"TURNGATE_TEST_TALLY_URL=" + tally.URL, "TURNGATE_TEST_GATE_URL=" + slow.URL}
			if driver == "postgres" {
				pg, _, _ := usePostgres(t, dir)
				env = append(env, pg...)
			}
			g := startGateway(t, gatewayOptions{Config: "turngate.yaml", Dir: dir, Env: env})
			t.Cleanup(slow.release) // before the gateway's stop

			const session = "journal-1"
			var sub submission
			g.json(http.MethodPost, "/v1/agents/demo/sessions/"+session+"/messages",
				map[string]any{"text": "tally apples then slow job j1", "async": true}, http.StatusAccepted, &sub)
			first := slow.waitCall(t)
			if first.IdempotencyKey == "" {
				t.Fatal("the slow tool's request has no Idempotency-Key header")
			}
			if n := len(tally.received()); n != 1 {
				t.Fatalf("the tally tool was called %d times before the kill, want 1", n)
			}

			g.Kill()
			slow.release()
			g.start()

			sub = waitCompleted(t, g, "demo", session, sub.SubmissionID)

			if calls := tally.received(); len(calls) != 1 {
				t.Errorf("the tally tool was called %d times, want once (the re-run reuses its journaled result): %+v", len(calls), calls)
			}
			retries := slow.received()
			if len(retries) != 2 {
				t.Fatalf("the slow tool was called %d times, want 2 (interrupted, then retried): %+v", len(retries), retries)
			}
			if retries[1].IdempotencyKey != first.IdempotencyKey || retries[1].ToolCallID != first.ToolCallID {
				t.Errorf("the retried slow call carries Idempotency-Key %q (call %s), want the interrupted call's %q (call %s)",
					retries[1].IdempotencyKey, retries[1].ToolCallID, first.IdempotencyKey, first.ToolCallID)
			}
			if tallyKey := tally.received()[0].IdempotencyKey; tallyKey == "" || tallyKey == first.IdempotencyKey {
				t.Errorf("the tally call's Idempotency-Key %q is empty or the slow call's", tallyKey)
			}

			msgs := g.history("demo", session)
			if len(msgs) != 2 || msgs[0].Role != "user" || msgs[1].Role != "assistant" {
				t.Fatalf("history = %+v, want the user message and one answer", msgs)
			}
			answer := msgs[1]
			if got := answer.text(); strings.Count(got, "Job finished") != 1 || !strings.Contains(got, `Counted: {"calls":1`) {
				t.Errorf("assistant text = %q, want the journaled tally (calls 1) and one finished job", got)
			}
		})
	}
}
