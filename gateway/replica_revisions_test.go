package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/store"
)

// TestReplicaRevisionsOnTheOverview: two replicas on one PostgreSQL store
// each report their live revision and rule files; GET /v1/admin/rules on
// either lists both, a reload on one shows on the other at once, and a
// replica that stopped reporting is marked stale by its age. On SQLite
// there is no list: the replica is the only one.
func TestReplicaRevisionsOnTheOverview(t *testing.T) {
	pg := onPostgres(t)
	src, err := os.ReadFile(filepath.Join("testdata", "rules", "basic", "tools.rego"))
	if err != nil {
		t.Fatal(err)
	}
	var gs []*testGateway
	dirs := map[string]string{}
	for _, id := range []string{"replica-a", "replica-b"} {
		cfg := testConfig(t, "basic")
		pg(cfg)
		decisionKeys(cfg)
		cfg.Replica.ID = id
		cfg.Rules.Dir = t.TempDir()
		if err := os.WriteFile(filepath.Join(cfg.Rules.Dir, "tools.rego"), src, 0o600); err != nil {
			t.Fatal(err)
		}
		dirs[id] = cfg.Rules.Dir
		gs = append(gs, startGateway(t, cfg, Options{}))
	}
	a, b := gs[0].as(dkAcmeAdmin), gs[1].as(dkGlobal)

	type overview struct {
		Revision string            `json:"revision"`
		Replicas []replicaRevision `json:"replicas"`
	}
	replicasOn := func(g *testGateway) (overview, map[string]replicaRevision) {
		var o overview
		g.doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &o)
		byName := map[string]replicaRevision{}
		for _, r := range o.Replicas {
			byName[r.Replica] = r
		}
		return o, byName
	}
	// Each reports when it starts.
	var first overview
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		o, byName := replicasOn(a)
		if len(byName) == 2 {
			first = o
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the overview lists %+v, want replica-a and replica-b", o.Replicas)
		}
	}
	for _, r := range first.Replicas {
		if r.Revision != first.Revision || r.Stale || r.ReportedAt.IsZero() || len(r.Files) != 1 || r.Files[0].Name != "tools.rego" {
			t.Errorf("%s: %+v, want revision %s with tools.rego, not stale", r.Replica, r, first.Revision)
		}
	}

	// A reload on b shows on a at once, a's own revision unchanged.
	extra := "package turngate.tool_call\n\nblock contains \"no\" if input.tool.name == \"drop\"\n"
	if err := os.WriteFile(filepath.Join(dirs["replica-b"], "extra.rego"), []byte(extra), 0o600); err != nil {
		t.Fatal(err)
	}
	var reloaded struct {
		Revision string `json:"revision"`
	}
	b.doJSON("POST", "/v1/admin/rules/reload", nil, http.StatusOK, &reloaded)
	o, byName := replicasOn(a)
	if reloaded.Revision == first.Revision || byName["replica-b"].Revision != reloaded.Revision || len(byName["replica-b"].Files) != 2 {
		t.Errorf("after b's reload to %s, a lists b as %+v", reloaded.Revision, byName["replica-b"])
	}
	if o.Revision != first.Revision || byName["replica-a"].Revision != first.Revision {
		t.Errorf("a serves %s and lists itself as %+v, want %s still", o.Revision, byName["replica-a"], first.Revision)
	}

	// A replica silent for five minutes is stale.
	relay := gs[0].srv.store.(store.Relay)
	files, _ := json.Marshal([]map[string]any{{"name": "tools.rego"}})
	if err := relay.ReportRevision(context.Background(), store.ReplicaRevision{Replica: "replica-gone", Revision: first.Revision, Files: files,
		ReportedAt: time.Now().Add(-5 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	o, byName = replicasOn(b)
	if gone := byName["replica-gone"]; !gone.Stale || gone.AgeSeconds < 300 {
		t.Errorf("the silent replica: %+v, want stale, 300 s old or more", gone)
	}
	var live []string
	for _, r := range o.Replicas {
		if !r.Stale {
			live = append(live, r.Replica)
		}
	}
	if !slices.Equal(live, []string{"replica-a", "replica-b"}) {
		t.Errorf("live replicas %v, want replica-a and replica-b in order", live)
	}

	// SQLite: no list.
	var sqlite map[string]any
	newTestGateway(t, "basic").doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &sqlite)
	if _, ok := sqlite["replicas"]; ok {
		t.Errorf("a SQLite gateway lists replicas: %v", sqlite["replicas"])
	}
}
