package decisions

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/store"
)

// FuzzParseQuery: any query string of GET /v1/admin/decisions is a query
// or a *ParamError naming one of its parameters ("" for a nameless
// one), never a panic; a tenant admin's
// query never reaches another tenant; a parsed cursor round-trips.
func FuzzParseQuery(f *testing.F) {
	for _, seed := range []string{
		"",
		"tenant=acme&tool=delete&outcome=block&limit=50",
		"turn=r1&order=asc",
		"since=2026-12-01T00:00:00Z&until=2026-12-02T00:00:00Z",
		"shadowChanged=true&hook=beforeToolCall&rule=tools.rego",
		"cursor=" + encodeCursor(store.DecisionKey{Time: time.Unix(1764633600, 5).UTC(), ID: 42}),
		"tennant=acme",
		"limit=0&limit=2",
		"cursor=%ff%00",
		"since=yesterday",
	} {
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, raw string, all bool) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		scope := Scope{AllTenants: all, Tenant: "acme"}
		q, err := ParseQuery(v, scope)
		if err != nil {
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Param != "" && !v.Has(pe.Param) {
				t.Fatalf("ParseQuery(%q) = %v, want a *ParamError naming one of its parameters", raw, err)
			}
			return
		}
		if !all && !q.None && q.Tenant != "" && q.Tenant != "acme" {
			t.Fatalf("a tenant admin of acme queries tenant %q", q.Tenant)
		}
		if c := v.Get("cursor"); c != "" {
			k, err := decodeCursor(c)
			if err != nil {
				t.Fatalf("ParseQuery accepted cursor %q that decodeCursor refuses: %v", c, err)
			}
			if back, err := decodeCursor(encodeCursor(*k)); err != nil || !back.Time.Equal(k.Time) || back.ID != k.ID {
				t.Fatalf("cursor %+v does not round-trip: %+v, %v", k, back, err)
			}
		}
	})
}
