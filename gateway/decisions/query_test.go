package decisions

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/turngate/turngate/internal/golden"
)

// TestParseQueryRefusals pins the whole message of each refusal of the
// list's query parameters: an unknown one, with and without a did you
// mean, a repeated or empty one, and each filter's bad value.
func TestParseQueryRefusals(t *testing.T) {
	var b strings.Builder
	for _, raw := range []string{
		"tol=delete",
		"bogus=1",
		"tool=a&tool=b",
		"tool=",
		"tool=%01",
		"tool=%ff",
		"session=" + strings.Repeat("s", 600),
		"since=yesterday",
		"until=2026-12-01",
		"since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z",
		"hook=beforeToolcal",
		"hook=zzzzzzzzzzzzzzzz",
		"outcome=blocked",
		"action=blok",
		"shadowChanged=yes",
		"shadowChanged=1",
		"limit=0",
		"limit=501",
		"limit=ten",
		"order=up",
		"order=acs",
		"cursor=not-a-cursor",
	} {
		v, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatal(err)
		}
		_, err = ParseQuery(v, Scope{AllTenants: true})
		var pe *ParamError
		if !errors.As(err, &pe) {
			t.Errorf("?%s: %v, want a *ParamError", raw, err)
			continue
		}
		// The closed sets stand as their names: a hook added to Hooks
		// changes their lists, not how a refusal reads.
		msg := strings.NewReplacer(strings.Join(Hooks, ", "), "{Hooks}", strings.Join(Outcomes, ", "), "{Outcomes}",
			strings.Join(Actions, ", "), "{Actions}").Replace(pe.Error())
		fmt.Fprintf(&b, "?%.80s\n\t%s\n", raw, msg)
	}
	golden.Check(t, "testdata/refusals.txt", b.String())
}

// TestParseQuery: each filter sets its field of the store's query, a
// tenant admin's query is its tenant's, another tenant's selects nothing;
// an empty cursor is the first page.
func TestParseQuery(t *testing.T) {
	raw := "since=2026-12-01T00:00:00Z&until=2026-12-02T00:00:00Z&tenant=acme&agent=demo&session=s1&turn=r1&tool=delete" +
		"&hook=beforeToolCall&outcome=matched&action=block&rule=tools.rego&revision=sha256:aa&shadowChanged=true&limit=7&order=asc"
	v, _ := url.ParseQuery(raw)
	q, err := ParseQuery(v, Scope{AllTenants: true})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %s %s %s %s %s %s %s %s %s %s %v %d %v", q.Since.Format("01-02"), q.Until.Format("01-02"),
		q.Tenant, q.Agent, q.SessionID, q.RequestID, q.Tool, q.Hook, q.Outcome, q.Action, q.Rule, q.Revision,
		*q.ShadowChanged, q.Limit, q.Ascending)
	want := "12-01 12-02 acme demo s1 r1 delete beforeToolCall matched block tools.rego sha256:aa true 7 true"
	if got != want {
		t.Errorf("?%s parsed to\n%s\nwant\n%s", raw, got, want)
	}
	for _, tc := range []struct {
		raw    string
		tenant string
		none   bool
	}{
		{"", "acme", false},
		{"tenant=acme", "acme", false},
		{"tenant=globex", "acme", true},
		{"cursor=", "acme", false},
	} {
		v, _ := url.ParseQuery(tc.raw)
		q, err := ParseQuery(v, Scope{Tenant: "acme"})
		if err != nil || q.Tenant != tc.tenant || q.None != tc.none || q.Limit != DefaultLimit || q.Ascending {
			t.Errorf("a tenant admin's ?%s: %+v, %v; want tenant %s, none %v", tc.raw, q, err, tc.tenant, tc.none)
		}
	}
}
