package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/gateway/store/storetest"
)

// openTestStore opens cfg's store: its SQLite file, or its PostgreSQL
// database.
func openTestStore(t testing.TB, cfg *config.Config) store.Store {
	t.Helper()
	if cfg.Store.Driver == config.StorePostgres {
		st, err := store.OpenPostgres(context.Background(), cfg.Store.DSN)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st, err := store.OpenSQLite(cfg.Store.Path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// onPostgres makes a test config use a PostgreSQL schema of its own.
func onPostgres(t testing.TB) func(*config.Config) {
	dsn := storetest.Schema(t)
	return func(cfg *config.Config) {
		cfg.Store = config.Store{Driver: config.StorePostgres, DSN: dsn}
	}
}

// forEachDriver runs f in a subtest per store driver, in parallel; its
// mod puts a config on that driver (SQLite: as testConfig has it).
func forEachDriver(t *testing.T, f func(t *testing.T, mod func(*config.Config))) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		f(t, func(*config.Config) {})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		f(t, onPostgres(t))
	})
}

// TestSubmissionQueueLimits: beyond the per-session or the per-tenant bound
// a submission is 429 with Retry-After; DELETE …/submissions?state=queued
// drops a session's queue.
func TestSubmissionQueueLimits(t *testing.T) {
	forEachDriver(t, func(t *testing.T, mod func(*config.Config)) {
		g := newTestGateway(t, "empty", mod, func(cfg *config.Config) {
			cfg.Limits.MaxQueuedSubmissionsPerSession = 2
			cfg.Limits.MaxQueuedSubmissionsPerTenant = 3
		})
		// No worker drains the queue.
		g.srv.subs.stop()
		g.srv.subs.wait()
		submit := func(session string, want int) submissionResponse {
			var sub submissionResponse
			g.doJSON("POST", "/v1/agents/demo/sessions/"+session+"/messages", map[string]any{"text": "hi", "async": true}, want, &sub)
			return sub
		}
		first := submit("s1", http.StatusAccepted)
		submit("s1", http.StatusAccepted)
		full := func(session, scope string) {
			t.Helper()
			resp := g.do("POST", "/v1/agents/demo/sessions/"+session+"/messages", map[string]any{"text": "hi", "async": true})
			defer resp.Body.Close()
			var e struct{ Code, Message string }
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusTooManyRequests || e.Code != CodeQueueFull || resp.Header.Get("Retry-After") != "5" {
				t.Errorf("%s: %d %+v (Retry-After %q), want 429 %s", session, resp.StatusCode, e, resp.Header.Get("Retry-After"), CodeQueueFull)
			}
			if want := "the " + scope + " already has"; len(e.Message) < len(want) || e.Message[:len(want)] != want {
				t.Errorf("%s: message %q does not name the %s", session, e.Message, scope)
			}
		}
		full("s1", "session")
		submit("s2", http.StatusAccepted)
		full("s3", "tenant")

		var dropped struct {
			Dropped int
			Status  string
		}
		g.doJSON("DELETE", "/v1/agents/demo/sessions/s1/submissions?state=queued", nil, http.StatusOK, &dropped)
		if dropped.Dropped != 2 || dropped.Status != store.StatusAborted {
			t.Errorf("drop = %+v, want 2 aborted", dropped)
		}
		g.doJSON("DELETE", "/v1/agents/demo/sessions/s1/submissions?state=queued", nil, http.StatusOK, &dropped)
		if dropped.Dropped != 0 {
			t.Errorf("second drop = %+v, want 0", dropped)
		}
		var sub submissionResponse
		g.doJSON("GET", "/v1/agents/demo/sessions/s1/submissions/"+first.SubmissionID, nil, http.StatusOK, &sub)
		if sub.Status != store.StatusAborted || string(sub.Result) != `{"error":"dropped"}` {
			t.Errorf("dropped submission = %+v", sub)
		}
		for _, bad := range []string{"", "?state=running", "?state=QUEUED"} {
			g.doJSON("DELETE", "/v1/agents/demo/sessions/s1/submissions"+bad, nil, http.StatusBadRequest, nil)
		}
		g.doJSON("DELETE", "/v1/agents/demo/sessions/nope/submissions?state=queued", nil, http.StatusNotFound, nil)
		g.doJSON("DELETE", "/v1/agents/other/sessions/s1/submissions?state=queued", nil, http.StatusNotFound, nil)
		submit("s1", http.StatusAccepted)
	})
}
