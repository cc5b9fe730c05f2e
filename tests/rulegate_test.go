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
	if len(st.LastError) != 1 || e.Location.File != "tool_call_test.rego" || e.Location.Line != 9 || e.Location.Column != 1 ||
		e.Rule != "data.turngate.tool_call_test.test_weather_paused" {
		t.Errorf("lastError = %+v, want test_weather_paused failed at tool_call_test.rego:9:1", st.LastError)
	}
	// The message shows the expression that failed and its values, as
	// `opa test --var-values` does.
	if want := "test failed at tool_call_test.rego:10:\n" +
		"\tdata.turngate.tool_call.block[\"weather lookups are PAUSED\"] with input as {\"tool\": {\"name\": \"weather\"}}\n" +
		"\t|\n\tundefined"; e.Message != want {
		t.Errorf("lastError message:\n%s\nwant:\n%s", e.Message, want)
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

// shadowDeletes is a shadow rule added to the e2e rules by TestShadowRule.
const shadowDeletes = `package turngate.tool_call

import rego.v1

# METADATA
# title: no deletes under /etc
# custom:
#   shadow: true
block contains "deleting system files is not allowed" if {
	input.tool.name == "delete"
	startswith(input.tool.input.path, "/etc/")
}
`

// TestShadowRule adds a shadow block rule to a running gateway: the delete
// it would block runs, and its decision record and the shadow metric show
// the block that would have happened.
func TestShadowRule(t *testing.T) {
	g, _ := startE2E(t)
	var before gateStatus
	g.json(http.MethodGet, "/v1/admin/rules", nil, http.StatusOK, &before)
	if err := os.WriteFile(filepath.Join(g.opts.Dir, "rules", "shadow.rego"), []byte(shadowDeletes), 0o644); err != nil {
		t.Fatal(err)
	}
	poll(t, "the shadow rule is served", func() error {
		var st gateStatus
		if code, err := g.getJSON("/v1/admin/rules", &st); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d: %v", code, err)
		}
		if st.Revision == before.Revision {
			return fmt.Errorf("revision is still %s (lastError %+v)", st.Revision, st.LastError)
		}
		return nil
	})

	s := g.chat("demo", userChat("shadow-1", "u1", "delete /etc/hosts", nil))
	if tc, ok := s.toolCall("delete"); !ok || !strings.Contains(string(tc.Output), `"deleted"`) {
		t.Fatalf("the delete did not run; a shadow rule must not block:\n%s", s)
	}
	rec := g.waitAudit("the shadowed delete", toolDecision("shadow-1", "delete"))
	const rule = "shadow.rego#no deletes under /etc"
	shadow, _ := rec["shadow"].(map[string]any)
	decision, _ := shadow["decision"].(map[string]any)
	fired, _ := shadow["rulesFired"].([]any)
	if rec["outcome"] != "no_match" || shadow["changed"] != true || decision["action"] != "block" ||
		decision["reason"] != "deleting system files is not allowed" || len(fired) != 1 || fired[0] != rule {
		t.Errorf("audit record = %v; want outcome no_match and a shadow block by %q", rec, rule)
	}
	if line := g.metricLine("turngate_shadow_effects_total", `hook="beforeToolCall"`, `rule="`+rule+`"`, `effect="block"`); !strings.HasSuffix(line, " 1") {
		t.Errorf("shadow metric = %q, want 1", line)
	}
}
