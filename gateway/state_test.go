package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/rulestate"
)

// weatherBatch numbers weatherCalls' batches, whose sessions are new.
var weatherBatch atomic.Int64

// weatherCalls sends n weather turns at once, spread over gws in turn,
// and counts how many of the calls ran and how many the state limit
// blocked, as the client sees them in the stream.
func weatherCalls(t *testing.T, gws []*testGateway, n int) (executed, blocked int) {
	t.Helper()
	batch := weatherBatch.Add(1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		g := gws[i%len(gws)]
		wg.Go(func() {
			chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody(fmt.Sprintf("s%d-%d", batch, i), "u1", "weather in Paris")))
			for _, c := range chunks {
				if c.str("type") != "tool-output-available" {
					continue
				}
				out := fmt.Sprint(c["output"])
				mu.Lock()
				if strings.Contains(out, "at most 20 weather calls an hour") {
					blocked++
				} else {
					executed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return executed, blocked
}

// TestStateLimitExactAcrossReplicas: 60 concurrent weather calls by one
// principal over 3 gateways on one PostgreSQL database, with a rule that
// blocks at 20 an hour: exactly 20 run and 40 are blocked.
func TestStateLimitExactAcrossReplicas(t *testing.T) {
	pg := onPostgres(t)
	var gws []*testGateway
	for i := range 3 {
		cfg := testConfig(t, "state")
		pg(cfg)
		cfg.Replica.ID = fmt.Sprintf("replica-%d", i)
		gws = append(gws, startGateway(t, cfg, Options{}))
	}
	if executed, blocked := weatherCalls(t, gws, 60); executed != 20 || blocked != 40 {
		t.Fatalf("%d calls ran and %d were blocked, want 20 and 40", executed, blocked)
	}
}

// TestStateLimitExactSQLite is its twin on SQLite in one process.
func TestStateLimitExactSQLite(t *testing.T) {
	g := newTestGateway(t, "state")
	if executed, blocked := weatherCalls(t, []*testGateway{g}, 60); executed != 20 || blocked != 40 {
		t.Fatalf("%d calls ran and %d were blocked, want 20 and 40", executed, blocked)
	}
}

// TestStateWindowExpires: at the limit the next call is blocked; once the
// hour (and its minute of resolution) has passed on the gateway's clock,
// the next call runs again.
func TestStateWindowExpires(t *testing.T) {
	forEachDriver(t, func(t *testing.T, mod func(*config.Config)) {
		cfg := testConfig(t, "state")
		mod(cfg)
		var mu sync.Mutex
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		st := openTestStore(t, cfg)
		g := startGateway(t, cfg, Options{Store: st, State: rulestate.New(st, rulestate.Options{Now: clock})})
		if executed, _ := weatherCalls(t, []*testGateway{g}, 20); executed != 20 {
			t.Fatalf("%d of the first 20 calls ran", executed)
		}
		if _, blocked := weatherCalls(t, []*testGateway{g}, 1); blocked != 1 {
			t.Fatal("the 21st call within the hour was not blocked")
		}
		mu.Lock()
		now = now.Add(time.Hour + time.Minute)
		mu.Unlock()
		if executed, _ := weatherCalls(t, []*testGateway{g}, 1); executed != 1 {
			t.Fatal("a call after the window passed was blocked")
		}
	})
}

// TestStateTypoRejectedOnReload: a rules edit that reads a misspelt state
// name is rejected by the reload of a running gateway, which keeps
// serving the old revision: the limit still holds.
func TestStateTypoRejectedOnReload(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"limits.state.yaml", "limits.rego"} {
		copyFile(t, filepath.Join("testdata", "rules", "state", name), filepath.Join(dir, name))
	}
	cfg := testConfig(t, "state")
	cfg.Rules.Dir = dir
	g := startGateway(t, cfg, Options{})
	live := g.srv.rules.Current().ID()
	rego, err := os.ReadFile(filepath.Join(dir, "limits.rego"))
	if err != nil {
		t.Fatal(err)
	}
	typo := strings.Replace(string(rego), "input.state.weather_per_hour", "input.state.weather_per_hours", 1)
	if err := os.WriteFile(filepath.Join(dir, "limits.rego"), []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = g.srv.rules.Reload()
	if err == nil || !strings.Contains(err.Error(), "limits.rego:7:14") || !strings.Contains(err.Error(), "did you mean input.state.weather_per_hour?") {
		t.Fatalf("reload error = %v, want the misspelt name at limits.rego:7:14 with a suggestion", err)
	}
	if got := g.srv.rules.Current().ID(); got != live {
		t.Fatalf("the live revision changed to %s", got)
	}
	if executed, blocked := weatherCalls(t, []*testGateway{g}, 21); executed != 20 || blocked != 1 {
		t.Fatalf("after the rejected reload %d calls ran and %d were blocked, want 20 and 1", executed, blocked)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStateInCEL: a beforeTurn CEL rule reads the caller's turns in the
// last hour (state.turns_per_hour, counted as each turn starts): the third
// turn is refused with the rule's reason.
func TestStateInCEL(t *testing.T) {
	g := newTestGateway(t, "state-cel")
	for i := range 3 {
		chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody(fmt.Sprintf("cel-%d", i), "u1", "hello")))
		refused := false
		for _, c := range chunks {
			refused = refused || (c.str("type") == "error" && strings.Contains(c.str("errorText"), "at most 2 turns an hour"))
		}
		if refused != (i == 2) {
			t.Fatalf("turn %d: refused %v: %v", i+1, refused, chunks)
		}
	}
}
