package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/decisions"
	"github.com/turngate/turngate/gateway/store/storefault"
)

// The keys of decisionKeys: a global admin, two tenant admins and two
// tenants' users.
const (
	dkGlobal     = "global-key-1a2b3c4d5e6f47a8b9c0d1e2f3a4b5c6"
	dkAcmeAdmin  = "acmeadm-key-2b3c4d5e6f7a48b9c0d1e2f3a4b5c6d7"
	dkGlobexAdm  = "globexadm-key-3c4d5e6f7a8b49c0d1e2f3a4b5c6d7e8"
	dkAcmeUser   = "acmeuser-key-4d5e6f7a8b9c40d1e2f3a4b5c6d7e8f9"
	dkGlobexUser = "globexuser-key-5e6f7a8b9c0d41e2f3a4b5c6d7e8f9a0"
	dkGlobalOnly = "globalonly-key-6f7a8b9c0d1e42f3a4b5c6d7e8f9a0b1"
)

func decisionKeys(cfg *config.Config) {
	cfg.Auth.APIKeys = []config.APIKey{
		{Key: dkGlobal, Tenant: "ops", Subject: "sec", Roles: []string{RoleAdmin, RoleGlobalAdmin}},
		{Key: dkAcmeAdmin, Tenant: "acme", Subject: "acme-admin", Roles: []string{RoleAdmin}},
		{Key: dkGlobexAdm, Tenant: "globex", Subject: "globex-admin", Roles: []string{RoleAdmin}},
		{Key: dkAcmeUser, Tenant: "acme", Subject: "alice"},
		{Key: dkGlobexUser, Tenant: "globex", Subject: "gus"},
		{Key: dkGlobalOnly, Tenant: "ops", Subject: "no-admin", Roles: []string{RoleGlobalAdmin}},
	}
}

// decisionsPage is the list's answer.
type decisionsPage struct {
	Decisions []decisions.Entry `json:"decisions"`
	Next      string            `json:"next"`
}

// runTurn runs a saveMessages turn of text and returns its request id.
func runTurn(t *testing.T, g *testGateway, session, text string) string {
	t.Helper()
	var out struct {
		RequestID string `json:"requestId"`
		Status    string `json:"status"`
	}
	g.doJSON("POST", "/v1/agents/demo/sessions/"+session+"/messages", map[string]any{"text": text}, http.StatusOK, &out)
	if out.Status != "completed" {
		t.Fatalf("turn %q: status %q", text, out.Status)
	}
	return out.RequestID
}

// storedDecisions waits until every record of the turns so far is in the
// store.
func storedDecisions(t *testing.T, g *testGateway) {
	t.Helper()
	g.srv.audit.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.srv.decisions.Flush(ctx); err != nil {
		t.Fatalf("flushing the decision store: %v", err)
	}
}

// list fetches one page of the list as g's key sees it.
func list(t *testing.T, g *testGateway, query string) decisionsPage {
	t.Helper()
	var p decisionsPage
	g.doJSON("GET", "/v1/admin/decisions?"+query, nil, http.StatusOK, &p)
	return p
}

func hooksOf(es []decisions.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Hook)
	}
	return out
}

// TestDecisionsAPI: a blocked tool call of an e2e turn is found by tool and
// action, its record is its JSONL audit line, the turn's timeline is its
// hooks in execution order; tenant admins see their tenant only, a global
// admin every tenant; pages walk the whole list.
func TestDecisionsAPI(t *testing.T) {
	cfg := testConfig(t, "basic")
	decisionKeys(cfg)
	g := startGateway(t, cfg, Options{})
	global, acmeAdm, globexAdm := g.as(dkGlobal), g.as(dkAcmeAdmin), g.as(dkGlobexAdm)
	blocked := runTurn(t, g.as(dkAcmeUser), "s1", "delete /tmp/x")
	weather := runTurn(t, g.as(dkGlobexUser), "s1", "weather in Lima")
	storedDecisions(t, g)

	// Found by tool and action; the record is the audit line.
	p := list(t, acmeAdm, "tool=delete&action=block&hook=beforeToolCall")
	if len(p.Decisions) != 1 {
		t.Fatalf("acme's blocked delete calls: %+v", p.Decisions)
	}
	d := p.Decisions[0]
	if d.Hook != "beforeToolCall" || d.Tenant != "acme" || d.Turn != blocked || d.Outcome != "matched" ||
		len(d.RulesFired) != 1 || !strings.HasPrefix(d.RulesFired[0], "data.turngate.tool_call.block") || !strings.Contains(string(d.Record), "delete is disabled") {
		t.Errorf("blocked decision %+v", d)
	}
	if !slices.Contains(strings.Split(g.auditLog(), "\n"), string(d.Record)) {
		t.Errorf("record %s is not a line of the JSONL audit log", d.Record)
	}
	var one decisions.Entry
	acmeAdm.doJSON("GET", "/v1/admin/decisions/"+d.ID, nil, http.StatusOK, &one)
	if one.ID != d.ID || string(one.Record) != string(d.Record) {
		t.Errorf("GET by id: %+v", one)
	}

	// The turn's timeline, in execution order.
	tl := list(t, acmeAdm, "turn="+blocked+"&order=asc&limit=500")
	hooks := hooksOf(tl.Decisions)
	if len(hooks) < 6 || hooks[0] != "beforeTurn" || hooks[1] != "beforeStep" || hooks[len(hooks)-1] != "onChatResponse" ||
		slices.Index(hooks, "beforeToolCall") > slices.Index(hooks, "afterToolCall") || !slices.Contains(hooks, "onStepFinish") {
		t.Errorf("timeline of %s: %v", blocked, hooks)
	}
	for _, e := range tl.Decisions {
		if e.Hook == "afterToolCall" && e.Action != "block" {
			t.Errorf("afterToolCall of the blocked call: action %q", e.Action)
		}
	}

	// Tenant admins: their own tenant only; 404 for another's record.
	if p := list(t, acmeAdm, "tenant=globex"); len(p.Decisions) != 0 {
		t.Errorf("acme's admin listed globex's records: %v", hooksOf(p.Decisions))
	}
	if p := list(t, acmeAdm, "turn="+weather); len(p.Decisions) != 0 {
		t.Errorf("acme's admin listed globex's turn: %v", hooksOf(p.Decisions))
	}
	for _, e := range list(t, acmeAdm, "limit=500").Decisions {
		if e.Tenant != "acme" {
			t.Fatalf("acme's admin listed a record of %s", e.Tenant)
		}
	}
	gw := list(t, globexAdm, "turn="+weather+"&limit=1")
	if len(gw.Decisions) != 1 {
		t.Fatalf("globex's admin: %+v", gw)
	}
	resp := acmeAdm.do("GET", "/v1/admin/decisions/"+gw.Decisions[0].ID, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("acme's admin reading globex's record: %d, want 404", resp.StatusCode)
	}
	// A global admin sees both tenants, and tenant= picks one.
	all := list(t, global, "limit=500")
	tenants := map[string]bool{}
	for _, e := range all.Decisions {
		tenants[e.Tenant] = true
	}
	if !tenants["acme"] || !tenants["globex"] {
		t.Errorf("the global admin saw tenants %v", tenants)
	}
	for _, e := range list(t, global, "tenant=globex&limit=500").Decisions {
		if e.Tenant != "globex" {
			t.Fatalf("tenant=globex listed a record of %s", e.Tenant)
		}
	}

	// Pages of 3 walk the whole list, newest first, each record once.
	var walked []string
	for cursor := ""; ; {
		p := list(t, global, "limit=3&cursor="+url.QueryEscape(cursor))
		for _, e := range p.Decisions {
			walked = append(walked, e.ID)
		}
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	var want []string
	for _, e := range all.Decisions {
		want = append(want, e.ID)
	}
	if !slices.Equal(walked, want) {
		t.Errorf("paging walked %v, want %v", walked, want)
	}
}

// TestDecisionsAPIRefusals: who may not ask, and every query it refuses
// with the parameter named.
func TestDecisionsAPIRefusals(t *testing.T) {
	cfg := testConfig(t, "basic")
	decisionKeys(cfg)
	g := startGateway(t, cfg, Options{})
	for _, tc := range []struct {
		key, path string
		status    int
	}{
		{"", "/v1/admin/decisions", http.StatusUnauthorized},
		{"", "/v1/admin/decisions/1", http.StatusUnauthorized},
		{"wrong-key-0000000000000000000000000000", "/v1/admin/decisions", http.StatusUnauthorized},
		{dkAcmeUser, "/v1/admin/decisions", http.StatusForbidden},
		{dkAcmeUser, "/v1/admin/decisions/1", http.StatusForbidden},
		{dkGlobalOnly, "/v1/admin/decisions", http.StatusForbidden},
		{dkAcmeAdmin, "/v1/admin/decisions/999999", http.StatusNotFound},
		{dkAcmeAdmin, "/v1/admin/decisions/01", http.StatusNotFound},
		{dkAcmeAdmin, "/v1/admin/decisions/-1", http.StatusNotFound},
		{dkAcmeAdmin, "/v1/admin/decisions/x", http.StatusNotFound},
	} {
		resp := g.as(tc.key).do("GET", tc.path, nil)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%q GET %s: %d, want %d", tc.key, tc.path, resp.StatusCode, tc.status)
		}
	}
	admin := g.as(dkAcmeAdmin)
	for _, tc := range []struct {
		query, param, says string
	}{
		{"tol=delete", "tol", `did you mean "tool"?`},
		{"bogus=1", "bogus", "is not a parameter"},
		{"hook=beforeToolcal", "hook", `did you mean "beforeToolCall"?`},
		{"outcome=blocked", "outcome", "is not one of"},
		{"action=blok", "action", `did you mean "block"?`},
		{"limit=0", "limit", "from 1 to 500"},
		{"limit=501", "limit", "from 1 to 500"},
		{"limit=ten", "limit", "from 1 to 500"},
		{"since=yesterday", "since", "RFC 3339"},
		{"since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z", "until", "after since"},
		{"shadowChanged=yes", "shadowChanged", "true or false"},
		{"order=up", "order", "is not one of"},
		{"cursor=not-a-cursor", "cursor", "is not a cursor"},
		{"cursor=" + url.QueryEscape("ZDEuMS4y"+"x"), "cursor", "is not a cursor"},
		{"tool=a&tool=b", "tool", "given 2 times"},
		{"tool=", "tool", "is empty"},
		{"tool=%01", "tool", "control character"},
		{"tool=%ff", "tool", "UTF-8"},
		{"session=" + strings.Repeat("s", 600), "session", "longer than 512"},
	} {
		resp := admin.do("GET", "/v1/admin/decisions?"+tc.query, nil)
		var e struct{ Code, Message, Param string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Param != tc.param || !strings.Contains(e.Message, tc.says) {
			t.Errorf("?%s: %d %+v; want 400 naming %s, saying %q", tc.query, resp.StatusCode, e, tc.param, tc.says)
		}
	}
	resp := admin.do("GET", "/v1/admin/decisions?tool=%zz", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a query string that does not parse: %d, want 400", resp.StatusCode)
	}
}

// TestDecisionsStoreOutage: while the store is unavailable the list is a
// 503 store_unavailable, the turns' records still reach the JSONL log,
// and once the store answers again every record is stored: none lost.
func TestDecisionsStoreOutage(t *testing.T) {
	g, faults := faultyGateway(t, decisionKeys)
	admin := g.as(dkGlobal)
	faults.Fail("InsertDecisions", 1, -1, storefault.Lost)
	faults.Fail("QueryDecisions", 1, -1, storefault.Lost)
	id := runTurn(t, g.as(dkAcmeUser), "s1", "delete /tmp/x")
	g.srv.audit.Flush()
	if !strings.Contains(g.auditLog(), `"requestId":"`+id+`"`) {
		t.Fatal("the turn's records are not in the JSONL audit log")
	}
	wantStoreUnavailable(t, admin.do("GET", "/v1/admin/decisions", nil))
	if g.srv.decisions.Pending() == 0 {
		t.Error("no records wait for the store during the outage")
	}
	if !strings.Contains(g.metricsText(), "turngate_decision_records_pending") {
		t.Error("no pending gauge in the metrics")
	}
	faults.Heal()
	storedDecisions(t, g)
	var inLog int
	for line := range strings.Lines(g.auditLog()) {
		if strings.Contains(line, `"requestId":"`+id+`"`) && !strings.Contains(line, `"kind":"turn"`) {
			inLog++
		}
	}
	got := list(t, admin, "turn="+id+"&limit=500")
	if len(got.Decisions) != inLog || inLog == 0 {
		t.Errorf("after the outage the store has %d records of the turn, the JSONL log %d", len(got.Decisions), inLog)
	}
}

// TestDecisionsReplay: the stored records replayed against a candidate
// posted as files: the candidate that allows delete turns the recorded
// block into allow-to-block's opposite, with the record's id; a broken
// candidate is a 400 with positioned errors; hostile bodies are refused.
func TestDecisionsReplay(t *testing.T) {
	cfg := testConfig(t, "basic")
	decisionKeys(cfg)
	cfg.Audit.Sink = config.SinkStdout // the records carry their input
	g := startGateway(t, cfg, Options{})
	since := time.Now().Add(-time.Minute).UTC()
	runTurn(t, g.as(dkAcmeUser), "s1", "delete /tmp/x")
	storedDecisions(t, g)
	blocked := list(t, g.as(dkAcmeAdmin), "hook=beforeToolCall&action=block").Decisions
	if len(blocked) != 1 {
		t.Fatalf("blocked: %+v", blocked)
	}
	allowAll := map[string]any{"files": map[string]string{"tools.rego": "package turngate.tool_call\n"}}
	var rep struct {
		Replayed int `json:"replayed"`
		Changed  int `json:"changed"`
		Changes  []struct {
			Kind     string `json:"kind"`
			Examples []struct {
				ID string `json:"id"`
			} `json:"examples"`
		} `json:"changes"`
	}
	g.as(dkAcmeAdmin).doJSON("POST", "/v1/admin/replay", map[string]any{"candidate": allowAll, "since": since}, http.StatusOK, &rep)
	if rep.Changed != 1 || len(rep.Changes) != 1 || rep.Changes[0].Kind != "block-to-allow" || rep.Changes[0].Examples[0].ID != blocked[0].ID {
		t.Errorf("replay: %+v, want one block-to-allow naming %s", rep, blocked[0].ID)
	}
	// A range holding more records than the limit is replayed up to it
	// and says so; one within it does not.
	var cut struct {
		Decisions int  `json:"decisions"`
		Truncated bool `json:"truncated"`
		Limit     int  `json:"limit"`
	}
	g.as(dkAcmeAdmin).doJSON("POST", "/v1/admin/replay", map[string]any{"candidate": allowAll, "since": since, "limit": 2}, http.StatusOK, &cut)
	if !cut.Truncated || cut.Limit != 2 || cut.Decisions > 2 {
		t.Errorf("a replay of 2 records of a longer range: %+v, want truncated at the limit of 2", cut)
	}
	g.as(dkAcmeAdmin).doJSON("POST", "/v1/admin/replay", map[string]any{"candidate": allowAll, "since": since}, http.StatusOK, &cut)
	if cut.Truncated || cut.Limit != decisions.DefaultReplay || cut.Decisions == 0 {
		t.Errorf("a replay within the default limit: %+v, want it whole", cut)
	}
	// Another tenant's admin replays none of acme's records.
	g.as(dkGlobexAdm).doJSON("POST", "/v1/admin/replay", map[string]any{"candidate": allowAll, "since": since}, http.StatusOK, &rep)
	if rep.Replayed != 0 {
		t.Errorf("globex's admin replayed %d of acme's records", rep.Replayed)
	}
	for name, body := range map[string]any{
		"broken rules":   map[string]any{"candidate": map[string]any{"files": map[string]string{"tools.rego": "package turngate.tool_call\nblock contains x if {"}}, "since": since},
		"a path":         map[string]any{"candidate": map[string]any{"files": map[string]string{"../x.rego": "package a"}}, "since": since},
		"no files":       map[string]any{"candidate": map[string]any{"files": map[string]string{}}, "since": since},
		"no since":       map[string]any{"candidate": allowAll},
		"limit too big":  map[string]any{"candidate": allowAll, "since": since, "limit": decisions.MaxReplayRecords + 1},
		"unknown field":  map[string]any{"candidate": allowAll, "since": since, "limt": 5},
		"until <= since": map[string]any{"candidate": allowAll, "since": since, "until": since},
	} {
		resp := g.as(dkAcmeAdmin).do("POST", "/v1/admin/replay", body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
	}
}
