package decisions

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/store"
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

// TestParseQuery: each query parameter sets its field of the store's
// query and nothing else (one case per parameter the list takes, as its
// refusal of an unknown one lists them), a tenant admin's query is its
// tenant's, another tenant's selects nothing; an empty cursor is the
// first page.
func TestParseQuery(t *testing.T) {
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	after := store.DecisionKey{Time: day.Add(90 * time.Minute), ID: 42}
	yes := true
	cases := []struct {
		param, value string
		set          func(q *store.DecisionQuery)
	}{
		{"since", "2026-12-01T00:00:00Z", func(q *store.DecisionQuery) { q.Since = day }},
		{"until", "2026-12-01T00:00:00Z", func(q *store.DecisionQuery) { q.Until = day }},
		{"tenant", "acme", func(q *store.DecisionQuery) { q.Tenant = "acme" }},
		{"agent", "demo", func(q *store.DecisionQuery) { q.Agent = "demo" }},
		{"session", "s1", func(q *store.DecisionQuery) { q.SessionID = "s1" }},
		{"turn", "req-1", func(q *store.DecisionQuery) { q.RequestID = "req-1" }},
		{"tool", "delete", func(q *store.DecisionQuery) { q.Tool = "delete" }},
		{"hook", "afterToolCall", func(q *store.DecisionQuery) { q.Hook = "afterToolCall" }},
		{"outcome", "no_match", func(q *store.DecisionQuery) { q.Outcome = "no_match" }},
		{"action", "block", func(q *store.DecisionQuery) { q.Action = "block" }},
		{"rule", "tools.rego:12", func(q *store.DecisionQuery) { q.Rule = "tools.rego:12" }},
		{"revision", "sha256:aa", func(q *store.DecisionQuery) { q.Revision = "sha256:aa" }},
		{"shadowChanged", "true", func(q *store.DecisionQuery) { q.ShadowChanged = &yes }},
		{"limit", "7", func(q *store.DecisionQuery) { q.Limit = 7 }},
		{"cursor", encodeCursor(after), func(q *store.DecisionQuery) { q.After = &after }},
		{"order", "asc", func(q *store.DecisionQuery) { q.Ascending = true }},
	}
	var tested []string
	for _, tc := range cases {
		tested = append(tested, tc.param)
		t.Run(tc.param, func(t *testing.T) {
			q, err := ParseQuery(url.Values{tc.param: {tc.value}}, Scope{AllTenants: true})
			if err != nil {
				t.Fatal(err)
			}
			want := store.DecisionQuery{Limit: DefaultLimit}
			tc.set(&want)
			if !reflect.DeepEqual(q.DecisionQuery, want) || q.None {
				t.Errorf("?%s=%s parsed to %+v, want %+v", tc.param, tc.value, q.DecisionQuery, want)
			}
		})
	}
	_, err := ParseQuery(url.Values{"zzzzzzzzzzzzzzzzzzzz": {"1"}}, Scope{AllTenants: true})
	listed, ok := "", false
	if err != nil {
		_, listed, ok = strings.Cut(err.Error(), "it takes ")
	}
	if takes := strings.Split(strings.TrimSuffix(listed, ")"), ", "); !ok || !slices.Equal(takes, tested) {
		t.Errorf("the list takes %v (%v), the cases test %v", takes, err, tested)
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
