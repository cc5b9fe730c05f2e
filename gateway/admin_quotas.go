package gateway

import (
	"cmp"
	"context"
	"slices"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/decisions"
	"github.com/turngate/turngate/gateway/quota"
)

// quotaView is a configured quota as GET /v1/admin/rules shows it, with
// its current usage.
type quotaView struct {
	Name         string `json:"name"`
	Per          string `json:"per"`
	Tenant       string `json:"tenant,omitempty"`
	Agent        string `json:"agent,omitempty"`
	Turns        int64  `json:"turns,omitempty"`
	InputTokens  int64  `json:"inputTokens,omitempty"`
	OutputTokens int64  `json:"outputTokens,omitempty"`
	Window       string `json:"window"`
	TimeZone     string `json:"timeZone,omitempty"`
	// Usage is the current count of each key the config names (quotaKeys)
	// that the viewer may see.
	Usage []quota.Usage `json:"usage"`
	// UsageTruncated says the quota has more keys than quota.MaxUsageRows.
	UsageTruncated bool `json:"usageTruncated,omitempty"`
}

// quotaViews returns the quotas scope may see, with their usage; a store
// that does not answer leaves the usage empty and is the error.
func (s *Server) quotaViews(ctx context.Context, scope decisions.Scope) ([]quotaView, error) {
	mine := func(tenant string) bool { return scope.AllTenants || tenant == "" || tenant == scope.Tenant }
	rep, err := s.quotas.Usage(ctx, s.quotaKeys(scope))
	views := []quotaView{}
	for _, q := range s.conf().Quotas {
		if !mine(q.Tenant) {
			continue
		}
		v := quotaView{Name: q.Name, Per: q.Per, Tenant: q.Tenant, Agent: q.Agent, Turns: q.Turns, InputTokens: q.InputTokens,
			OutputTokens: q.OutputTokens, Window: q.Window, TimeZone: q.TimeZone, Usage: []quota.Usage{}, UsageTruncated: rep.Truncated[q.Name]}
		for _, u := range rep.Rows[q.Name] {
			// A key of no tenant (per agent) counts every tenant's turns:
			// a tenant admin sees it only when the quota is its tenant's.
			if scope.AllTenants || u.Tenant == scope.Tenant || u.Tenant == "" && q.Tenant == scope.Tenant {
				v.Usage = append(v.Usage, u)
			}
		}
		views = append(views, v)
	}
	return views, err
}

// quotaKeys are the identities whose quota keys GET /v1/admin/rules
// reads: each principal of the config's API keys (the anonymous one
// without keys) of the tenants scope may see, with each agent, sorted. A
// principal known only from a JWT is not among them.
func (s *Server) quotaKeys(scope decisions.Scope) []engine.Identity {
	if s.quotas == nil {
		return nil
	}
	var ps []engine.Principal
	for _, k := range s.conf().Auth.APIKeys {
		ps = append(ps, engine.Principal{Tenant: k.Tenant, Subject: k.Subject})
	}
	if len(ps) == 0 {
		ps = append(ps, engine.Principal{Tenant: anonymous.Tenant, Subject: anonymous.Subject})
	}
	ids := make([]engine.Identity, 0, len(ps)*len(s.conf().Agents))
	for _, p := range ps {
		if !scope.AllTenants && p.Tenant != scope.Tenant {
			continue
		}
		for _, a := range s.conf().Agents {
			ids = append(ids, engine.Identity{Agent: a.Name, Principal: p})
		}
	}
	order := func(a, b engine.Identity) int {
		return cmp.Or(cmp.Compare(a.Principal.Tenant, b.Principal.Tenant), cmp.Compare(a.Principal.Subject, b.Principal.Subject),
			cmp.Compare(a.Agent, b.Agent))
	}
	slices.SortFunc(ids, order)
	return slices.CompactFunc(ids, func(a, b engine.Identity) bool { return order(a, b) == 0 })
}
