package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/quota"
)

// TestAdminQuotaUsage: GET /v1/admin/rules shows each quota's current
// usage per key after a few turns — a global admin every tenant's, a
// tenant admin its own tenant's only: not another tenant's counts, not
// another tenant's quota, and not the count of a key every tenant shares.
func TestAdminQuotaUsage(t *testing.T) {
	g := newTestGateway(t, "basic", func(c *config.Config) {
		decisionKeys(c)
		c.Quotas = []config.Quota{
			{Name: "tenant-turns", Per: "tenant", Turns: 100, Window: "day"},
			{Name: "principal-output", Per: "principal", OutputTokens: 100000, Window: "1h"},
			{Name: "fleet-demo", Per: "agent", Agent: "demo", Turns: 50, Window: "1m"},
			{Name: "globex-demo", Per: "agent", Tenant: "globex", Agent: "demo", Turns: 10, Window: "1m"},
		}
	})
	for i, key := range []string{dkAcmeUser, dkAcmeUser, dkGlobexUser} {
		g.as(key).doJSON("POST", fmt.Sprintf("/v1/agents/demo/sessions/q%d/messages", i), map[string]any{"text": "hello"}, http.StatusOK, nil)
	}
	for _, tc := range []struct {
		name string
		key  string
		// want: each quota shown, its usage as "key=used" (tokens as
		// "key=some" when more than none).
		want map[string][]string
	}{
		{"global admin", dkGlobal, map[string][]string{
			"tenant-turns":     {"acme=2", "globex=1", "ops=0"},
			"principal-output": {"acme/acme-admin=0", "acme/alice=some", "globex/globex-admin=0", "globex/gus=some", "ops/no-admin=0", "ops/sec=0"},
			"fleet-demo":       {"agent demo=3"},
			"globex-demo":      {"agent demo=1"},
		}},
		{"acme admin", dkAcmeAdmin, map[string][]string{
			"tenant-turns":     {"acme=2"},
			"principal-output": {"acme/acme-admin=0", "acme/alice=some"},
			"fleet-demo":       {},
		}},
		{"globex admin", dkGlobexAdm, map[string][]string{
			"tenant-turns":     {"globex=1"},
			"principal-output": {"globex/globex-admin=0", "globex/gus=some"},
			"fleet-demo":       {},
			"globex-demo":      {"agent demo=1"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st struct {
				Quotas []struct {
					Name  string        `json:"name"`
					Usage []quota.Usage `json:"usage"`
				} `json:"quotas"`
				QuotaUsageError string `json:"quotaUsageError"`
			}
			g.as(tc.key).doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &st)
			if st.QuotaUsageError != "" {
				t.Fatalf("quotaUsageError %q", st.QuotaUsageError)
			}
			// The day's window started at the last UTC midnight (the one
			// before, should the request have run across midnight).
			day := time.Now().UTC().Truncate(24 * time.Hour)
			got := map[string][]string{}
			for _, q := range st.Quotas {
				rows := []string{}
				for _, u := range q.Usage {
					rows = append(rows, usageRow(q.Name, u))
					if u.Limit == 0 || u.Since.IsZero() || q.Name == "tenant-turns" && !u.Since.Equal(day) && !u.Since.Equal(day.AddDate(0, 0, -1)) {
						t.Errorf("%s: row %+v: want its limit and the window's start (%s for a day)", q.Name, u, day)
					}
				}
				slices.Sort(rows)
				got[q.Name] = rows
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("quota usage\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// usageRow renders u as TestAdminQuotaUsage's want does.
func usageRow(name string, u quota.Usage) string {
	key := u.Tenant
	if u.Principal != "" {
		key += "/" + u.Principal
	}
	if u.Agent != "" {
		key = strings.TrimPrefix(key+" agent "+u.Agent, " ")
	}
	used := fmt.Sprint(u.Used)
	if strings.Contains(name, "output") && u.Used > 0 {
		used = "some"
	}
	return key + "=" + used
}
