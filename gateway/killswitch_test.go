package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/killswitch"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/fakeclock"
)

// The keys of killSwitchKeys: an operator's admin key and two tenants'
// user keys.
const (
	ksOpsKey    = "ops-key-6f1d2c3b4a5e46f7b8c9d0e1f2a3b4c5"
	ksAcmeKey   = "acme-key-7a2e3d4c5b6f47a8b9c0d1e2f3a4b5c6"
	ksGlobexKey = "globex-key-8b3f4e5d6c7a48b9c0d1e2f3a4b5c6d7"
)

// killSwitchKeys configures ksOpsKey, ksAcmeKey and ksGlobexKey.
func killSwitchKeys(cfg *config.Config) {
	cfg.Auth.APIKeys = []config.APIKey{
		{Key: ksOpsKey, Tenant: "ops", Subject: "oncall", Roles: []string{RoleAdmin, RoleGlobalAdmin}},
		{Key: ksAcmeKey, Tenant: "acme", Subject: "alice"},
		{Key: ksGlobexKey, Tenant: "globex", Subject: "gus"},
	}
}

// as returns a copy of g sending key.
func (g *testGateway) as(key string) *testGateway {
	cp := *g
	cp.key = key
	return &cp
}

// weatherRan reports whether a chat's stream shows the weather tool's
// real output, and whether it shows the kill switch's reason instead.
func weatherRan(t *testing.T, g *testGateway, session, msgID string) (ran, stopped bool) {
	t.Helper()
	body := mustJSON(readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody(session, msgID, "weather in Lima"))))
	return strings.Contains(body, `"tempC":`), strings.Contains(body, killswitch.ToolReason)
}

// TestKillSwitchStopsToolCalls: an operator stops one tenant's weather
// calls; that tenant's calls are blocked with the fixed reason, as an
// audited decision naming the switch, counted; another tenant's run. The
// switch shows in /v1/admin/rules and /readyz, survives a rules reload and
// a restart, and its lift lets the calls run again.
func TestKillSwitchStopsToolCalls(t *testing.T) {
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	g := startGateway(t, cfg, Options{})
	ops, acme, globex := g.as(ksOpsKey), g.as(ksAcmeKey), g.as(ksGlobexKey)
	if ran, _ := weatherRan(t, acme, "s1", "u1"); !ran {
		t.Fatal("before any switch the weather tool did not run")
	}

	var k store.KillSwitch
	ops.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "tools": []string{"weath*"},
		"scope": map[string]any{"tenant": "acme"}, "reason": "incident 42: weather API leaks"}, http.StatusCreated, &k)
	if !strings.HasPrefix(k.ID, "ks_") || k.CreatedBy != "oncall" || k.Tenant != "acme" {
		t.Fatalf("switch set: %+v", k)
	}
	if ran, stopped := weatherRan(t, acme, "s1", "u2"); ran || !stopped {
		t.Errorf("acme's weather call: ran %v, stopped with the fixed reason %v; want stopped", ran, stopped)
	}
	if ran, _ := weatherRan(t, globex, "s1", "u1"); !ran {
		t.Error("globex's weather call was stopped by acme's switch")
	}

	// The audit log: who set it and why, and the stop as a decision.
	var setRec, stopRec map[string]any
	for _, line := range strings.Split(g.auditLog(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case rec["kind"] == audit.KindKillSwitch:
			setRec = rec
		case rec["kind"] == audit.KindDecision && rec["toolName"] == "weather" && strings.Contains(line, "killswitch/"+k.ID):
			stopRec = rec
		}
	}
	if setRec == nil || setRec["action"] != "set" || setRec["by"] != "oncall" || setRec["reason"] != "incident 42: weather API leaks" {
		t.Errorf("kill switch audit record %v: want set by oncall with the reason", setRec)
	}
	if stopRec == nil || stopRec["tenant"] != "acme" || stopRec["outcome"] != "matched" || !strings.Contains(mustJSON(stopRec["decision"]), killswitch.ToolReason) {
		t.Errorf("stop decision record %v: want acme's matched block naming the switch", stopRec)
	}
	if m := g.metricsText(); !strings.Contains(m, `turngate_killswitch_stops_total{scope="tenant",what="tool_call"} 1`) {
		t.Errorf("metrics lack the stop:\n%s", grepLines(m, "killswitch"))
	}

	// Shown where operators look.
	var rules struct {
		Revision     string             `json:"revision"`
		KillSwitches []store.KillSwitch `json:"killSwitches"`
	}
	ops.doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &rules)
	if len(rules.KillSwitches) != 1 || rules.KillSwitches[0].ID != k.ID {
		t.Errorf("/v1/admin/rules kill switches %+v, want %s", rules.KillSwitches, k.ID)
	}
	var ready map[string]any
	ops.doJSON("GET", "/readyz", nil, http.StatusOK, &ready)
	if ready["killSwitches"] != 1.0 || ready["ready"] != true {
		t.Errorf("/readyz with a key %v: want ready with killSwitches 1", ready)
	}
	// An anonymous probe learns readiness, not that an incident is under way.
	var anonymous map[string]any
	g.doJSON("GET", "/readyz", nil, http.StatusOK, &anonymous)
	if _, ok := anonymous["killSwitches"]; ok || anonymous["ready"] != true {
		t.Errorf("anonymous /readyz %v: want ready without killSwitches", anonymous)
	}

	// A rules reload does not lift it.
	ops.doJSON("POST", "/v1/admin/rules/reload", nil, http.StatusOK, nil)
	if _, stopped := weatherRan(t, acme, "s1", "u3"); !stopped {
		t.Error("a rules reload lifted the kill switch")
	}

	// A restart on the same store keeps it.
	g.close()
	g = startGateway(t, cfg, Options{})
	ops, acme = g.as(ksOpsKey), g.as(ksAcmeKey)
	if _, stopped := weatherRan(t, acme, "s1", "u4"); !stopped {
		t.Error("after a restart the kill switch no longer stops")
	}

	var list struct {
		KillSwitches []store.KillSwitch `json:"killSwitches"`
	}
	ops.doJSON("GET", "/v1/admin/killswitch", nil, http.StatusOK, &list)
	if len(list.KillSwitches) != 1 {
		t.Fatalf("list: %+v", list)
	}
	var refused map[string]any
	ops.doJSON("DELETE", "/v1/admin/killswitch/"+k.ID, map[string]any{"reason": "fixed\x1b[2J"}, http.StatusBadRequest, &refused)
	if msg, _ := refused["message"].(string); !strings.Contains(msg, "field reason: is not one line of UTF-8 text without control characters") {
		t.Errorf("a lift reason with an escape sequence: %q", msg)
	}
	ops.doJSON("DELETE", "/v1/admin/killswitch/"+k.ID, map[string]any{"reason": "fixed upstream"}, http.StatusOK, nil)
	if ran, _ := weatherRan(t, acme, "s1", "u5"); !ran {
		t.Error("after the lift the weather tool still does not run")
	}
	ops.doJSON("DELETE", "/v1/admin/killswitch/"+k.ID, nil, http.StatusNotFound, nil)
	if !strings.Contains(g.auditLog(), `"action":"lifted"`) || !strings.Contains(g.auditLog(), `"reason":"fixed upstream"`) {
		t.Error("the lift is not audited with its reason")
	}
}

// TestKillSwitchStopsTurns: a turns switch for one agent refuses its turns
// on every entry path, before the model is called and before anything is
// stored, with each path's refusal shape; other agents' turns run.
func TestKillSwitchStopsTurns(t *testing.T) {
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	g := startGateway(t, cfg, Options{})
	ops, acme := g.as(ksOpsKey), g.as(ksAcmeKey)
	ops.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "turns", "scope": map[string]any{"agent": "demo"}, "reason": "runaway"}, http.StatusCreated, nil)

	refused := func(what string, resp *http.Response) map[string]any {
		t.Helper()
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: status %d, want 403: %s", what, resp.StatusCode, data)
		}
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil {
			t.Fatalf("%s: %s: %v", what, data, err)
		}
		return body
	}
	for _, tc := range []struct{ what, path string }{
		{"chat", "/v1/agents/demo/chat"},
		{"saveMessages", "/v1/agents/demo/sessions/s2/messages"},
	} {
		body := chatBody("s1", "u1", "hello")
		if tc.what == "saveMessages" {
			body = map[string]any{"text": "hello"}
		}
		got := refused(tc.what, acme.do("POST", tc.path, body))
		if got["code"] != CodeKillSwitch || got["message"] != killswitch.TurnReason {
			t.Errorf("%s: body %v, want code %s and the fixed reason", tc.what, got, CodeKillSwitch)
		}
	}
	got := refused("openai", acme.do("POST", "/v1/chat/completions", map[string]any{"model": "demo",
		"messages": []any{map[string]any{"role": "user", "content": "hello"}}}))
	if e, _ := got["error"].(map[string]any); e["code"] != CodeKillSwitch || e["type"] != "permission_error" || e["message"] != killswitch.TurnReason {
		t.Errorf("openai: body %v, want OpenAI's error body with code %s", got, CodeKillSwitch)
	}
	got = refused("anthropic", acme.do("POST", "/v1/messages", map[string]any{"model": "demo", "max_tokens": 10,
		"messages": []any{map[string]any{"role": "user", "content": "hello"}}}))
	if e, _ := got["error"].(map[string]any); got["type"] != "error" || e["type"] != "permission_error" || e["message"] != killswitch.TurnReason {
		t.Errorf("anthropic: body %v, want Anthropic's permission_error", got)
	}

	ws := g.dialWS(t, "demo", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + ksAcmeKey}}})
	ws.write(sendFrame("r1", "s3", "u1", "hello", nil))
	if r := ws.collect("r1"); r.end != "error" || r.err["code"] != CodeKillSwitch || r.err["status"] != 403.0 || r.err["errorText"] != killswitch.TurnReason {
		t.Errorf("WebSocket: ended %s with %v, want an error frame with code %s", r.end, r.err, CodeKillSwitch)
	}

	// Nothing was stored: the model never ran, no session was made.
	for _, s := range []string{"s1", "s2", "s3"} {
		acme.doJSON("GET", "/v1/agents/demo/sessions/"+s+"/messages", nil, http.StatusNotFound, nil)
	}
	g.srv.audit.Flush() // the records are written behind the answers
	if n := strings.Count(g.auditLog(), `"hook":"beforeTurn"`); n != 5 {
		t.Errorf("%d beforeTurn decision records, want 5 (one per refused turn)", n)
	}
	// Another agent's turns run.
	acme.doJSON("POST", "/v1/agents/other/sessions/s9/messages", map[string]any{"text": "hello"}, http.StatusOK, nil)
}

// TestKillSwitchRefusesBadInput: a switch that would be inactive or mean
// something else than written is a 400 naming the problem; only admins
// set, list and lift.
func TestKillSwitchRefusesBadInput(t *testing.T) {
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	g := startGateway(t, cfg, Options{})
	ops := g.as(ksOpsKey)
	for _, tc := range []struct {
		name string
		body any
		want string
	}{
		{"unknown scope key", `{"block":"tools","scope":{"tennant":"acme"},"reason":"r"}`, `unknown field "tennant"`},
		{"unknown key", `{"block":"tools","tool":["weather"],"reason":"r"}`, `unknown field "tool"`},
		{"misspelt tool", map[string]any{"block": "tools", "tools": []string{"wether"}, "reason": "r"}, `field tools[0]: "wether" matches none of the gateway's tools (did you mean "weather"?)`},
		{"bad pattern", map[string]any{"block": "tools", "tools": []string{"[a-z]*"}, "reason": "r"}, `field tools[0]`},
		{"unknown agent", map[string]any{"block": "turns", "scope": map[string]any{"agent": "dem"}, "reason": "r"}, `field scope.agent: no agent is named "dem" (did you mean "demo"?)`},
		{"unknown tenant", map[string]any{"block": "tools", "scope": map[string]any{"tenant": "acmee"}, "reason": "r"}, `field scope.tenant: no API key is of tenant "acmee" (did you mean "acme"?)`},
		{"no reason", map[string]any{"block": "turns"}, `field reason: is required`},
		{"tools as a string", `{"block":"tools","tools":"weather","reason":"r"}`, `field tools: expected an array, got JSON string`},
		{"a date for a time", `{"block":"tools","reason":"r","expiresAt":"2026-12-03"}`, `a time must be an RFC 3339 string such as "2026-12-02T09:00:00Z", not "2026-12-03"`},
		{"a number for a time", `{"block":"tools","reason":"r","expiresAt":5}`, `a time must be an RFC 3339 string such as "2026-12-02T09:00:00Z", not a non-string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out map[string]any
			ops.doJSON("POST", "/v1/admin/killswitch", tc.body, http.StatusBadRequest, &out)
			if msg, _ := out["message"].(string); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want it to contain %q", msg, tc.want)
			}
		})
	}
	var list struct {
		KillSwitches []store.KillSwitch `json:"killSwitches"`
	}
	ops.doJSON("GET", "/v1/admin/killswitch", nil, http.StatusOK, &list)
	if len(list.KillSwitches) != 0 {
		t.Errorf("refused switches were stored: %+v", list.KillSwitches)
	}
	acme := g.as(ksAcmeKey)
	acme.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "turns", "reason": "r"}, http.StatusForbidden, nil)
	acme.doJSON("GET", "/v1/admin/killswitch", nil, http.StatusForbidden, nil)
	acme.doJSON("DELETE", "/v1/admin/killswitch/ks_x", nil, http.StatusForbidden, nil)
}

// TestKillSwitchOnReplicas: on three replicas of one PostgreSQL database,
// a switch set on one stops the tool calls on all three, and its lift
// reaches them all too. The replicas poll only hourly here, so only the
// notification can carry it: the time it took is logged (no timed
// assertion: the machine may be loaded), the figure of the docs.
func TestKillSwitchOnReplicas(t *testing.T) {
	defer func(p time.Duration) { killSwitchPoll = p }(killSwitchPoll)
	killSwitchPoll = time.Hour
	gs := threeReplicas(t)
	var k store.KillSwitch
	start := time.Now()
	applied := goWaitApplied(t, gs, func(s *Server) bool { return s.kill.ToolCall("acme", "demo", "weather") != nil })
	gs[0].as(ksOpsKey).doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "reason": "incident"}, http.StatusCreated, &k)
	answered := time.Since(start)
	at := applied()
	t.Logf("kill switch set on replica-a (answered after %v): in force on replica-a after %v, replica-b after %v, replica-c after %v",
		answered, at[0].Sub(start), at[1].Sub(start), at[2].Sub(start))
	for i, g := range gs {
		if ran, stopped := weatherRan(t, g.as(ksAcmeKey), "s"+string(rune('a'+i)), "u1"); ran || !stopped {
			t.Errorf("%s: weather ran %v, stopped %v; want stopped", g.cfg.Replica.ID, ran, stopped)
		}
	}
	start = time.Now()
	lifted := goWaitApplied(t, gs, func(s *Server) bool { return s.kill.ToolCall("acme", "demo", "weather") == nil })
	gs[2].as(ksOpsKey).doJSON("DELETE", "/v1/admin/killswitch/"+k.ID, nil, http.StatusOK, nil)
	at = lifted()
	t.Logf("kill switch lifted on replica-c: lifted on replica-a after %v, replica-b after %v", at[0].Sub(start), at[1].Sub(start))
	for i, g := range gs {
		if ran, _ := weatherRan(t, g.as(ksAcmeKey), "s"+string(rune('a'+i)), "u2"); !ran {
			t.Errorf("%s: after the lift the weather tool does not run", g.cfg.Replica.ID)
		}
	}
}

// goWaitApplied polls, from now on in a goroutine, every 100 µs, when each
// gateway first satisfies cond; wait returns those times (at most 30 s:
// a bound, not an assertion on the time).
func goWaitApplied(t *testing.T, gs []*testGateway, cond func(*Server) bool) (wait func() []time.Time) {
	t.Helper()
	at := make([]time.Time, len(gs))
	done := make(chan bool, 1)
	go func() {
		deadline := time.Now().Add(30 * time.Second)
		for left := len(gs); left > 0; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) {
				done <- false
				return
			}
			for i, g := range gs {
				if at[i].IsZero() && cond(g.srv) {
					at[i] = time.Now()
					left--
				}
			}
		}
		done <- true
	}()
	return func() []time.Time {
		t.Helper()
		if !<-done {
			t.Fatalf("not applied on every replica in 30 s: %v", at)
		}
		return at
	}
}

// TestKillSwitchExpires: a switch with an expiry stops calls until then
// and lifts itself at it (the gateway's injected clock, no sleep).
func TestKillSwitchExpires(t *testing.T) {
	clock := fakeclock.New(time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC))
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	g := startGateway(t, cfg, Options{Now: clock.Now})
	var k store.KillSwitch
	g.as(ksOpsKey).doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "reason": "for ten minutes", "expiresIn": "10m"}, http.StatusCreated, &k)
	if want := clock.Now().Add(10 * time.Minute); !k.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt %v, want %v", k.ExpiresAt, want)
	}
	acme := g.as(ksAcmeKey)
	clock.Advance(10*time.Minute - time.Second)
	if _, stopped := weatherRan(t, acme, "s1", "u1"); !stopped {
		t.Error("a second before its expiry the switch does not stop the call")
	}
	clock.Advance(time.Second)
	if ran, _ := weatherRan(t, acme, "s1", "u2"); !ran {
		t.Error("at its expiry the switch still stops the call")
	}
	var list struct {
		KillSwitches []store.KillSwitch `json:"killSwitches"`
	}
	g.as(ksOpsKey).doJSON("GET", "/v1/admin/killswitch", nil, http.StatusOK, &list)
	if len(list.KillSwitches) != 0 {
		t.Errorf("an expired switch is listed: %+v", list.KillSwitches)
	}
}

// threeReplicas starts replica-a, -b and -c on one PostgreSQL schema, with
// the keys of killSwitchKeys; mods change each config.
func threeReplicas(t *testing.T, mods ...func(*config.Config)) []*testGateway {
	t.Helper()
	pg := onPostgres(t)
	var gs []*testGateway
	for _, id := range []string{"replica-a", "replica-b", "replica-c"} {
		cfg := testConfig(t, "basic")
		pg(cfg)
		killSwitchKeys(cfg)
		cfg.Replica.ID = id
		for _, m := range mods {
			m(cfg)
		}
		gs = append(gs, startGateway(t, cfg, Options{}))
	}
	return gs
}

// toolGate is an observer whose AfterToolCall signals entered and waits
// for open: the turn stands still between its tool call and the end of
// its step.
type toolGate struct {
	engine.NopHooks
	entered, open chan struct{}
}

func (g *toolGate) AfterToolCall(context.Context, *engine.ToolCallResultContext) {
	g.entered <- struct{}{}
	<-g.open
}

// TestKillSwitchStopsRunningTurn: a turns switch set while a turn runs
// ends it before its next model step, with the reason in the text the
// client sees.
func TestKillSwitchStopsRunningTurn(t *testing.T) {
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	gate := &toolGate{entered: make(chan struct{}, 1), open: make(chan struct{})}
	g := startGateway(t, cfg, Options{Observer: gate})
	resp := goDo(g.as(ksAcmeKey), "POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "weather in Lima"})
	<-gate.entered
	g.as(ksOpsKey).doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "turns", "reason": "runaway"}, http.StatusCreated, nil)
	close(gate.open)
	r := resp()
	defer r.Body.Close()
	var res turnResponse
	if err := json.NewDecoder(r.Body).Decode(&res); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", r.StatusCode, err)
	}
	if text := mustJSON(res.Message); !strings.Contains(text, "Stopped after 1 step (stopped by the operator's kill switch).") || strings.Contains(text, "Here is the weather") {
		t.Errorf("the running turn was not stopped at its next step: %s", text)
	}
	if !strings.Contains(g.auditLog(), `"hook":"beforeStep"`) {
		t.Error("the stop is not a beforeStep decision record")
	}
}

// TestKillSwitchStopsSubAgents: a switch reaches into sub-agent turns: a
// turns switch of the sub-agent's agent refuses its turn (the parent's
// tool call fails with the fixed reason, never the switch), and a tools
// switch stops the sub-agent's own calls.
func TestKillSwitchStopsSubAgents(t *testing.T) {
	cfg := testConfig(t, "basic")
	killSwitchKeys(cfg)
	g := startGateway(t, cfg, Options{})
	ops, acme := g.as(ksOpsKey), g.as(ksAcmeKey)
	var k store.KillSwitch
	ops.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "turns", "scope": map[string]any{"agent": "demo"}, "reason": "demo runs away"}, http.StatusCreated, &k)
	var res turnResponse
	acme.doJSON("POST", "/v1/agents/boss/sessions/s1/messages", map[string]any{"text": "delegate weather in Oslo"}, http.StatusOK, &res)
	body := mustJSON(res.Message)
	if !strings.Contains(body, `"state":"output-error"`) || strings.Contains(body, k.ID) || strings.Contains(body, "Here is the weather") {
		t.Errorf("the boss's delegation: %s; want the sub-agent's turn refused, the call failed", body)
	}
	if !strings.Contains(g.auditLog(), "killswitch/"+k.ID) {
		t.Error("the refused sub-agent turn is not a decision record naming the switch")
	}
	ops.doJSON("DELETE", "/v1/admin/killswitch/"+k.ID, nil, http.StatusOK, nil)
	ops.doJSON("POST", "/v1/admin/killswitch", map[string]any{"block": "tools", "tools": []string{"weather"}, "reason": "weather leaks"}, http.StatusCreated, nil)
	acme.doJSON("POST", "/v1/agents/boss/sessions/s2/messages", map[string]any{"text": "delegate weather in Oslo"}, http.StatusOK, &res)
	if body := mustJSON(res.Message); !strings.Contains(body, "The sub-agent said") || strings.Contains(body, `\"tempC\"`) {
		t.Errorf("the sub-agent's weather call ran: %s", body)
	}
}
