package gateway

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy/ruleset"
)

// overviewStatus is what the console's Overview reads of GET /v1/admin/rules.
type overviewStatus struct {
	Dir          string              `json:"dir"`
	Revision     string              `json:"revision"`
	Reloads      []ruleset.Reload    `json:"reloads"`
	Tests        ruleset.TestSummary `json:"tests"`
	ShadowRules  []map[string]any    `json:"shadowRules"`
	KillSwitches []store.KillSwitch  `json:"killSwitches"`
	Quotas       []map[string]any    `json:"quotas"`
	Coverage     *ruleset.Coverage   `json:"coverage"`
	// ShadowDisagreements is the decision store's count.
	ShadowDisagreements *struct {
		Tenant string    `json:"tenant"`
		Since  time.Time `json:"since"`
		Window string    `json:"window"`
		Count  int64     `json:"count"`
	} `json:"shadowDisagreements"`
}

// TestAdminRulesOverview: GET /v1/admin/rules keeps the reload history
// (newest first, a rejected reload with its file:line), and shows a tenant
// admin only the kill switches and quotas of its tenant or of everyone,
// and the host's rules directory to a global admin only.
func TestAdminRulesOverview(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"tools.rego", "results.rego"} {
		copyFile(t, filepath.Join("testdata", "rules", "basic", f), filepath.Join(dir, f))
	}
	g := newTestGateway(t, "basic", func(c *config.Config) {
		c.Rules.Dir = dir
		decisionKeys(c)
		c.Quotas = []config.Quota{
			{Name: "fleet-turns", Per: "tenant", Turns: 1000, Window: "day"},
			{Name: "acme-tokens", Per: "tenant", Tenant: "acme", InputTokens: 5000, Window: "hour"},
			{Name: "globex-turns", Per: "agent", Tenant: "globex", Turns: 10, Window: "1m"},
		}
	})
	global, acme := g.as(dkGlobal), g.as(dkAcmeAdmin)

	// An accepted reload, then a rejected one at bad.rego:2.
	if err := os.WriteFile(filepath.Join(dir, "extra.rego"), []byte("package turngate.tool_call\n\nblock contains \"no\" if input.tool.name == \"drop\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extra_test.rego"), []byte("package turngate.tool_call_test\n\nimport data.turngate.tool_call\n\ntest_drop_blocked if \"no\" in tool_call.block with input as {\"tool\": {\"name\": \"drop\"}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	global.doJSON("POST", "/v1/admin/rules/reload", nil, http.StatusOK, nil)
	if err := os.WriteFile(filepath.Join(dir, "bad.rego"), []byte("package turngate.tool_call\nblock contains if {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	global.doJSON("POST", "/v1/admin/rules/reload", nil, http.StatusUnprocessableEntity, nil)

	for _, ks := range []map[string]any{
		{"block": "tools", "scope": map[string]any{"tenant": "acme"}, "reason": "acme incident"},
		{"block": "tools", "scope": map[string]any{"tenant": "globex"}, "reason": "globex incident"},
		{"block": "turns", "reason": "fleet freeze"},
	} {
		global.doJSON("POST", "/v1/admin/killswitch", ks, http.StatusCreated, nil)
	}

	for _, tc := range []struct {
		name       string
		as         *testGateway
		wantKills  []string // reasons
		wantQuotas []string
		wantDir    string
	}{
		{"global admin", global, []string{"acme incident", "fleet freeze", "globex incident"}, []string{"acme-tokens", "fleet-turns", "globex-turns"}, dir},
		{"acme admin", acme, []string{"acme incident", "fleet freeze"}, []string{"acme-tokens", "fleet-turns"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st overviewStatus
			tc.as.doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &st)
			if len(st.Reloads) != 2 {
				t.Fatalf("reloads %+v, want the rejected one then the accepted one", st.Reloads)
			}
			bad, good := st.Reloads[0], st.Reloads[1]
			if bad.Accepted || len(bad.Errors) == 0 || bad.Errors[0].Location.File != "bad.rego" || bad.Errors[0].Location.Line == 0 || bad.Time.Before(good.Time) {
				t.Errorf("newest reload %+v: want rejected with an error at bad.rego:LINE", bad)
			}
			if !good.Accepted || good.Revision != st.Revision || len(good.Errors) != 0 {
				t.Errorf("older reload %+v: want accepted, revision %s", good, st.Revision)
			}
			if !st.Tests.Ran || st.Tests.Passed != 1 || st.Tests.Failed != 0 {
				t.Errorf("tests %+v: want extra_test.rego's one test passed", st.Tests)
			}
			if st.Coverage == nil || st.Coverage.Rego.CoverableLines == 0 || st.Coverage.Rego.CoveredLines == 0 {
				t.Errorf("coverage %+v: want the live revision's Rego line coverage", st.Coverage)
			}
			if st.Dir != tc.wantDir {
				t.Errorf("rules directory %q, want %q", st.Dir, tc.wantDir)
			}
			if global := tc.wantDir != ""; global != (st.ShadowRules != nil) {
				t.Errorf("shadowRules %v: want [] for a global admin only (this replica's counts are every tenant's)", st.ShadowRules)
			}
			var kills, quotas []string
			for _, k := range st.KillSwitches {
				kills = append(kills, k.Reason)
			}
			for _, q := range st.Quotas {
				quotas = append(quotas, q["name"].(string))
			}
			slices.Sort(kills)
			slices.Sort(quotas)
			if !slices.Equal(kills, tc.wantKills) || !slices.Equal(quotas, tc.wantQuotas) {
				t.Errorf("kill switches %v, quotas %v; want %v, %v", kills, quotas, tc.wantKills, tc.wantQuotas)
			}
		})
	}
}

// TestRulesReloadNeedsGlobalAdmin: a reload changes every tenant's rules,
// so a tenant admin's reload — by key or from the console — is a 403
// naming the global-admin role, and a global admin's goes through.
func TestRulesReloadNeedsGlobalAdmin(t *testing.T) {
	g := newTestGateway(t, "basic", decisionKeys)
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"a tenant admin's key", bearer(dkAcmeAdmin), http.StatusForbidden},
		{"a tenant admin's console session", consoleSignIn(t, g, dkGlobexAdm), http.StatusForbidden},
		{"a global admin's key", bearer(dkGlobal), http.StatusOK},
		{"a global admin's console session", consoleSignIn(t, g, dkGlobal), http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := status(t, g, "POST", "/v1/admin/rules/reload", "{}", tc.headers...)
			if code != tc.status {
				t.Fatalf("reload: %d %s, want %d", code, body, tc.status)
			}
			if code == http.StatusForbidden && !strings.Contains(body, `\"global-admin\" role`) {
				t.Errorf("the refusal %s does not name the global-admin role", body)
			}
		})
	}
}

// TestKillSwitchTenantAdmin: a tenant admin (admin without global-admin)
// sets, lists and lifts the kill switches of its own tenant only; the
// fleet's it sees (they stop it too) but cannot set or lift, another
// tenant's it neither sees nor lifts.
func TestKillSwitchTenantAdmin(t *testing.T) {
	g := newTestGateway(t, "basic", decisionKeys)
	global, acme := g.as(dkGlobal), g.as(dkAcmeAdmin)
	var fleet, globex, own map[string]any
	global.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "turns", "reason": "fleet freeze"}, http.StatusCreated, &fleet)
	global.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "scope": map[string]any{"tenant": "globex"}, "reason": "globex incident"}, http.StatusCreated, &globex)

	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		status int
	}{
		{"a fleet-wide switch", "POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "reason": "x"}, http.StatusForbidden},
		{"another tenant's switch", "POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "scope": map[string]any{"tenant": "globex"}, "reason": "x"}, http.StatusForbidden},
		{"lifting the fleet's switch", "DELETE", "/v1/admin/killswitch/" + fleet["id"].(string), nil, http.StatusForbidden},
		{"lifting another tenant's switch", "DELETE", "/v1/admin/killswitch/" + globex["id"].(string), nil, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			acme.doJSON(tc.method, tc.path, tc.body, tc.status, nil)
		})
	}
	acme.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "scope": map[string]any{"tenant": "acme"}, "reason": "acme incident"}, http.StatusCreated, &own)

	var list struct {
		KillSwitches []map[string]any `json:"killSwitches"`
	}
	acme.doJSON("GET", "/v1/admin/killswitch", nil, http.StatusOK, &list)
	var reasons []string
	for _, k := range list.KillSwitches {
		reasons = append(reasons, k["reason"].(string))
	}
	slices.Sort(reasons)
	if want := []string{"acme incident", "fleet freeze"}; !slices.Equal(reasons, want) {
		t.Errorf("a tenant admin lists %v, want %v", reasons, want)
	}
	acme.doJSON("DELETE", "/v1/admin/killswitch/"+own["id"].(string), nil, http.StatusOK, nil)
	global.doJSON("DELETE", "/v1/admin/killswitch/"+globex["id"].(string), nil, http.StatusOK, nil)
}

// TestAdminRulesShadowDisagreementsByTenant: the Overview's shadow
// disagreements come from the decision store, the last 24 h of the
// admin's tenant for a tenant admin and of every tenant for a global
// admin, who alone also sees this replica's per-rule counts.
func TestAdminRulesShadowDisagreementsByTenant(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"tools.rego", "results.rego"} {
		copyFile(t, filepath.Join("testdata", "rules", "basic", f), filepath.Join(dir, f))
	}
	shadow := "beforeTurn:\n  - name: three-steps\n    shadow: true\n    set:\n      maxSteps: '3'\n"
	if err := os.WriteFile(filepath.Join(dir, "turn.yaml"), []byte(shadow), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newTestGateway(t, "basic", func(c *config.Config) { c.Rules.Dir = dir; decisionKeys(c) })
	runTurn(t, g.as(dkAcmeUser), "s1", "weather in Lima")
	runTurn(t, g.as(dkAcmeUser), "s2", "weather in Oslo")
	runTurn(t, g.as(dkGlobexUser), "s1", "weather in Lima")
	storedDecisions(t, g)

	for _, tc := range []struct {
		name       string
		key        string
		wantTenant string
		wantCount  int64
		wantRules  bool
	}{
		{"acme admin", dkAcmeAdmin, "acme", 2, false},
		{"globex admin", dkGlobexAdm, "globex", 1, false},
		{"global admin", dkGlobal, "", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st overviewStatus
			g.as(tc.key).doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &st)
			d := st.ShadowDisagreements
			if d == nil {
				t.Fatal("shadowDisagreements missing")
			}
			if d.Tenant != tc.wantTenant || d.Count != tc.wantCount || d.Window != "24h0m0s" || time.Since(d.Since) < 24*time.Hour {
				t.Errorf("shadowDisagreements %+v: want tenant %q, count %d over the last 24h", *d, tc.wantTenant, tc.wantCount)
			}
			if (len(st.ShadowRules) > 0) != tc.wantRules {
				t.Errorf("shadowRules %v: want this replica's per-rule counts for a global admin only", st.ShadowRules)
			}
		})
	}
}
