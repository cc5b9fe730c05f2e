package tests

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gateStatus is the part of GET /v1/admin/rules the reload-gate test reads.
type gateStatus struct {
	Revision  string `json:"revision"`
	LastError []struct {
		Code     string `json:"code"`
		Location struct {
			File   string `json:"file"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"location"`
		Rule    string `json:"rule"`
		Message string `json:"message"`
	} `json:"lastError"`
}

// The rule and test edits of TestFailingTestRejectsReload.
const (
	pauseWeather = "\nblock contains \"weather lookups are paused\" if input.tool.name == \"weather\"\n"
	weatherTest  = `package turngate.tool_call_test

import rego.v1

test_delete_blocked_in_read_only if {
	data.turngate.tool_call.block["delete is disabled in read-only mode"] with input as {"tool": {"name": "delete"}, "body": {"mode": "read-only"}}
}

test_weather_paused if {
	data.turngate.tool_call.block["weather lookups are PAUSED"] with input as {"tool": {"name": "weather"}}
}
`
)

// TestFailingTestRejectsReload edits the rules of a running gateway: a
// rule change whose test fails is never served (weather keeps running, the
// admin API names the failing test at its position, the rejection is
// counted); fixing the test serves the change.
func TestFailingTestRejectsReload(t *testing.T) {
	g, _ := startE2E(t)
	var before gateStatus
	g.json(http.MethodGet, "/v1/admin/rules", nil, http.StatusOK, &before)
	rules := filepath.Join(g.opts.Dir, "rules")
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(rules, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The test file first: every intermediate state has the failing test.
	write("tool_call_test.rego", weatherTest)
	rule, err := os.ReadFile(filepath.Join(rules, "tool_call.rego"))
	if err != nil {
		t.Fatal(err)
	}
	write("tool_call.rego", string(rule)+pauseWeather)

	var st gateStatus
	poll(t, "the admin API reports the failing test", func() error {
		st = gateStatus{}
		if code, err := g.getJSON("/v1/admin/rules", &st); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d: %v", code, err)
		}
		if len(st.LastError) == 0 || st.LastError[0].Code != "test_failed" {
			return fmt.Errorf("lastError = %+v", st.LastError)
		}
		return nil
	})
	e := st.LastError[0]
	if len(st.LastError) != 1 || filepath.Base(e.Location.File) != "tool_call_test.rego" || e.Location.Line != 9 || e.Location.Column != 1 ||
		e.Rule != "data.turngate.tool_call_test.test_weather_paused" || e.Message != "test failed" {
		t.Errorf("lastError = %+v, want test_weather_paused failed at tool_call_test.rego:9:1", st.LastError)
	}
	if st.Revision != before.Revision {
		t.Errorf("revision = %s, want the last good %s", st.Revision, before.Revision)
	}
	s := g.chat("demo", userChat("gate-1", "u1", "weather in Oslo", nil))
	if tc, ok := s.toolCall("weather"); !ok || !strings.Contains(string(tc.Output), `"Oslo"`) {
		t.Fatalf("weather did not run on the last good revision:\n%s", s)
	}
	if line := g.metricLine("turngate_rule_reload_rejections_total", `reason="test"`); line == "" {
		t.Error("no turngate_rule_reload_rejections_total{reason=\"test\"} sample")
	}

	// Fixed: the change is served.
	write("tool_call_test.rego", strings.Replace(weatherTest, "PAUSED", "paused", 1))
	poll(t, "the fixed rules are served", func() error {
		st = gateStatus{}
		if code, err := g.getJSON("/v1/admin/rules", &st); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d: %v", code, err)
		}
		if st.Revision == before.Revision || len(st.LastError) > 0 {
			return fmt.Errorf("revision %s, lastError %+v", st.Revision, st.LastError)
		}
		return nil
	})
	s = g.chat("demo", userChat("gate-2", "u1", "weather in Oslo", nil))
	if tc, ok := s.toolCall("weather"); !ok || !strings.Contains(string(tc.Output), "weather lookups are paused") {
		t.Fatalf("the tested rule does not block weather:\n%s", s)
	}
}
