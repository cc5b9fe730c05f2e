package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
)

// The monitoring files deploy/ ships.
const (
	dashboardFile = "../deploy/grafana/turngate.json"
	alertsFile    = "../deploy/prometheus/alerts.yaml"
)

// seriesName matches the turngate series an expression reads.
var seriesName = regexp.MustCompile(`\bturngate_[a-z0-9_]+\b`)

// grafanaPanel is the part of a Grafana panel the test reads; a row's
// panels are nested.
type grafanaPanel struct {
	ID      int            `json:"id"`
	Type    string         `json:"type"`
	Title   string         `json:"title"`
	Targets []grafanaQuery `json:"targets"`
	Panels  []grafanaPanel `json:"panels"`
}

type grafanaQuery struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

// dashboardExprs returns the PromQL of every panel and template variable
// of the Grafana dashboard at path, after checking each panel has an id
// of its own, a title and queries.
func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string         `json:"uid"`
		Title      string         `json:"title"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: uid %q, title %q, %d panels; want all three", path, d.UID, d.Title, len(d.Panels))
	}
	var exprs []string
	ids := map[int]bool{}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if ids[p.ID] || p.Title == "" {
				t.Errorf("%s: panel %d %q: ids must be unique and titles set", path, p.ID, p.Title)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", path, p.Title)
			}
			for _, q := range p.Targets {
				if q.RefID == "" || q.Expr == "" {
					t.Errorf("%s: panel %q: a query without refId or expr", path, p.Title)
				}
				exprs = append(exprs, q.Expr)
			}
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil || q.Query == "" {
			t.Errorf("%s: variable %s: query %s", path, v.Name, v.Query)
		}
		exprs = append(exprs, q.Query)
	}
	return exprs
}

// alertExprs returns the expression of every alerting rule of the
// Prometheus rule file at path, after checking each has a severity and a
// summary.
func alertExprs(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var exprs []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: rule %q of group %s: want alert, expr, labels.severity and annotations.summary", path, r.Alert, g.Name)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	return exprs
}

// flakyStore fails its next CountPendingApprovals (the scrape's store
// read) as an unavailable store would, once fail is set.
type flakyStore struct {
	store.Store
	fail atomic.Bool
}

func (f *flakyStore) CountPendingApprovals(ctx context.Context) (map[string]int, error) {
	if f.fail.CompareAndSwap(true, false) {
		return nil, &store.UnavailableError{Op: "CountPendingApprovals", Err: errors.New("connection refused")}
	}
	return f.Store.CountPendingApprovals(ctx)
}

// TestDeployDashboardSeries: every series the Grafana dashboard and the
// Prometheus alerts read is on a gateway's /metrics once it has served a
// turn (with a tool call, under a quota) and once a scrape found its store
// unavailable, so renaming a series breaks this test rather than a
// dashboard in production. promtool, when installed, checks the alerts.
func TestDeployDashboardSeries(t *testing.T) {
	dashboard, alerts := dashboardExprs(t, dashboardFile), alertExprs(t, alertsFile)
	for file, exprs := range map[string][]string{dashboardFile: dashboard, alertsFile: alerts} {
		if len(exprs) < 6 {
			t.Errorf("%s: %d expressions, want the file's panels or alerts", file, len(exprs))
		}
	}
	if promtool, err := exec.LookPath("promtool"); err == nil {
		if out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", alertsFile, err, out)
		}
	} else {
		t.Log("promtool is not installed: the alerts are not checked by promtool (apt-get install prometheus)")
	}

	cfg := testConfig(t, "basic")
	cfg.Quotas = []config.Quota{{Name: "tenant-output", Per: "tenant", OutputTokens: 1_000_000, Window: "day"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	st := &flakyStore{Store: openTestStore(t, cfg)}
	g := startGateway(t, cfg, Options{Store: st})
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("deploy-1", "u1", "weather in Lima")))
	st.fail.Store(true)
	g.metricsText()
	samples := map[string]bool{}
	for line := range strings.Lines(g.metricsText()) {
		if name, _, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
			name, _, _ = strings.Cut(name, "{")
			samples[name] = true
		}
	}
	for file, exprs := range map[string][]string{dashboardFile: dashboard, alertsFile: alerts} {
		var missing []string
		for _, e := range exprs {
			for _, name := range seriesName.FindAllString(e, -1) {
				if !samples[name] && !slices.Contains(missing, name) {
					missing = append(missing, name)
				}
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s reads series /metrics does not have: %s", file, strings.Join(missing, ", "))
		}
	}
}
