package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// killSwitchStop is the fixed text the model sees for a stopped call.
const killSwitchStop = `"This tool call was stopped by the operator's kill switch."`

// exampleKillSwitch: the operator stops acme's weather calls; they are
// blocked with the fixed reason while globex's run; a reload and a restart
// keep the switch; a turns switch refuses the agent's turns; the lifts
// bring everything back; the audit log has who and why.
func exampleKillSwitch(t *testing.T, x *exampleRun) {
	ops, acme, globex := x.as("ops-demo-255485b16c443fec1d4b3e41c9dcb104"), x.as("acme-demo-0803cf7b2d044192a24b16c8565e68a5"), x.as("globex-demo-c17f818adf87d48aef3df478ad529aec")
	weather := func(g *gateway, session, msgID string) string {
		t.Helper()
		call, ok := g.chat("assistant", userChat(session, msgID, "weather in Lima", nil)).toolCall("weather")
		if !ok {
			t.Fatalf("%s: no weather call", session)
		}
		return string(call.Output)
	}
	if out := weather(acme, "acme-1", "u1"); !strings.HasPrefix(out, `{"city":"Lima"`) {
		t.Fatalf("before the switch: weather output %s", out)
	}
	var set struct {
		ID string `json:"id"`
	}
	ops.json(http.MethodPost, "/v1/admin/killswitch", map[string]any{"block": "tools", "tools": []string{"weath*"},
		"scope": map[string]any{"tenant": "acme"}, "reason": "incident 42"}, http.StatusCreated, &set)
	if out := weather(acme, "acme-1", "u2"); out != killSwitchStop {
		t.Errorf("acme's weather output %s, want the kill switch's reason", out)
	}
	if out := weather(globex, "globex-1", "u1"); !strings.HasPrefix(out, `{"city":"Lima"`) {
		t.Errorf("globex's weather output %s, want it run", out)
	}
	ops.json(http.MethodPost, "/v1/admin/rules/reload", nil, http.StatusOK, nil)
	if out := weather(acme, "acme-1", "u3"); out != killSwitchStop {
		t.Errorf("after a reload: acme's weather output %s", out)
	}
	x.Restart() // on a new port: the keyed views again
	ops, acme, globex = x.as("ops-demo-255485b16c443fec1d4b3e41c9dcb104"), x.as("acme-demo-0803cf7b2d044192a24b16c8565e68a5"), x.as("globex-demo-c17f818adf87d48aef3df478ad529aec")
	if out := weather(acme, "acme-1", "u4"); out != killSwitchStop {
		t.Errorf("after a restart: acme's weather output %s", out)
	}

	var turns struct {
		ID string `json:"id"`
	}
	ops.json(http.MethodPost, "/v1/admin/killswitch", map[string]any{"block": "turns", "scope": map[string]any{"agent": "assistant"},
		"reason": "runaway agent", "expiresIn": "1h"}, http.StatusCreated, &turns)
	var refused map[string]any
	globex.json(http.MethodPost, "/v1/agents/assistant/sessions/globex-2/messages", map[string]any{"text": "hello"}, http.StatusForbidden, &refused)
	if refused["code"] != "kill_switch" {
		t.Errorf("a turn of the stopped agent: %v, want code kill_switch", refused)
	}
	globex.json(http.MethodGet, "/v1/agents/assistant/sessions/globex-2/messages", nil, http.StatusNotFound, nil)

	ops.json(http.MethodDelete, "/v1/admin/killswitch/"+set.ID, map[string]any{"reason": "provider fixed"}, http.StatusOK, nil)
	ops.json(http.MethodDelete, "/v1/admin/killswitch/"+turns.ID, nil, http.StatusOK, nil)
	if out := weather(acme, "acme-1", "u5"); !strings.HasPrefix(out, `{"city":"Lima"`) {
		t.Errorf("after the lift: acme's weather output %s", out)
	}
	waitFileAudit(t, x, "the lift's record", func(rec map[string]any) bool {
		sw, _ := rec["switch"].(map[string]any)
		return rec["kind"] == "killswitch" && rec["action"] == "lifted" && rec["by"] == "oncall" && rec["reason"] == "provider fixed" && sw["id"] == set.ID
	})
	waitFileAudit(t, x, "a stopped call's decision", func(rec map[string]any) bool {
		return rec["kind"] == "decision" && rec["tenant"] == "acme" && fired(rec, "killswitch/"+set.ID)
	})
}

// waitFileAudit polls the example's file audit sink (./data/audit.log)
// until a record matches.
func waitFileAudit(t *testing.T, x *exampleRun, what string, match func(map[string]any) bool) {
	t.Helper()
	poll(t, "an audit record for "+what, func() error {
		data, err := os.ReadFile(filepath.Join(x.dir, "data", "audit.log"))
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && match(rec) {
				return nil
			}
		}
		return fmt.Errorf("none in %d bytes", len(data))
	})
}
