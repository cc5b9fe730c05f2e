package killswitch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/fakeclock"
	"github.com/turngate/turngate/policy"
)

var known = Known{Agents: []string{"support", "billing"}, Tenants: []string{"acme", "globex"}, Tools: []string{"send_email", "send_sms", "http_post", "search", "files__read"}}

var t0 = time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)

// switchOf decodes body as the API does and checks it against known at t0.
func switchOf(t *testing.T, body string) (*store.KillSwitch, error) {
	t.Helper()
	var sp Spec
	if err := json.Unmarshal([]byte(body), &sp); err != nil {
		t.Fatal(err)
	}
	return sp.Switch(known, "oncall", t0)
}

func TestSpecRefusals(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"no block", `{"reason":"r"}`, `field block: is required: "tools" or "turns"`},
		{"misspelt block", `{"block":"tool","reason":"r"}`, `field block: "tool" is not "tools" or "turns" (did you mean "tools"?)`},
		{"tools on turns", `{"block":"turns","tools":["search"],"reason":"r"}`, `field tools: applies only to block "tools"`},
		{"misspelt tool", `{"block":"tools","tools":["send_emial"],"reason":"r"}`, `field tools[0]: "send_emial" matches none of the gateway's tools (did you mean "send_email"?)`},
		{"pattern matching nothing", `{"block":"tools","tools":["search","wire_*"],"reason":"r"}`, `field tools[1]: "wire_*" matches none of the gateway's tools;`},
		{"character class", `{"block":"tools","tools":["send_[ae]mail"],"reason":"r"}`, `field tools[0]: "send_[ae]mail" uses '[': patterns have only * (any run of characters) and ? (one character)`},
		{"empty tool", `{"block":"tools","tools":[""],"reason":"r"}`, `field tools[0]: "" is empty`},
		{"space in tool", `{"block":"tools","tools":["send email"],"reason":"r"}`, `holds a space or control character`},
		{"unknown agent", `{"block":"turns","scope":{"agent":"suport"},"reason":"r"}`, `field scope.agent: no agent is named "suport" (did you mean "support"?)`},
		{"unknown tenant", `{"block":"tools","scope":{"tenant":"acmee"},"reason":"r"}`, `field scope.tenant: no API key is of tenant "acmee" (did you mean "acme"?)`},
		{"no reason", `{"block":"turns"}`, `field reason: is required`},
		{"blank reason", `{"block":"turns","reason":"  "}`, `field reason: is required`},
		{"both expiries", `{"block":"turns","reason":"r","expiresIn":"1h","expiresAt":"2026-12-02T07:00:00Z"}`, `field expiresIn: set expiresAt or expiresIn, not both`},
		{"past expiry", `{"block":"turns","reason":"r","expiresAt":"2026-12-02T05:00:00Z"}`, `field expiresAt: 2026-12-02T05:00:00Z is not in the future`},
		{"bad duration", `{"block":"turns","reason":"r","expiresIn":"30 minutes"}`, `field expiresIn: "30 minutes" is not a duration`},
		{"negative duration", `{"block":"turns","reason":"r","expiresIn":"-5m"}`, `field expiresIn: "-5m" must be positive`},
		{"too far", `{"block":"turns","reason":"r","expiresIn":"10000h"}`, `more than a year`},
		{"nul in tenant", `{"block":"turns","reason":"r","scope":{"tenant":"a\u0000b"}}`, `field scope.tenant: is not one line of UTF-8 text without control characters`},
		{"escape sequence in reason", `{"block":"turns","reason":"ok\u001b[2J\u001b[Hall clear"}`, `field reason: is not one line of UTF-8 text without control characters`},
		{"newline in reason", `{"block":"turns","reason":"a\nb"}`, `field reason: is not one line`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := switchOf(t, tt.body)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Switch = %+v, %v; want a *FieldError", k, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSpecAccepted(t *testing.T) {
	tests := []struct {
		name, body string
		want       store.KillSwitch
	}{
		{"every tool call of the fleet", `{"block":"tools","reason":"incident 7"}`,
			store.KillSwitch{Block: "tools", Tools: []string{}, Reason: "incident 7"}},
		{"patterns of a tenant, for 30 minutes", `{"block":"tools","tools":["send_*","http_post"],"scope":{"tenant":"acme"},"reason":"exfiltration","expiresIn":"30m"}`,
			store.KillSwitch{Block: "tools", Tools: []string{"send_*", "http_post"}, Tenant: "acme", Reason: "exfiltration", ExpiresAt: t0.Add(30 * time.Minute)}},
		{"an unknown client tool, allowed", `{"block":"tools","tools":["confirm_payment"],"allowUnknownTools":true,"reason":"r"}`,
			store.KillSwitch{Block: "tools", Tools: []string{"confirm_payment"}, Reason: "r"}},
		{"every turn of one agent of one tenant, until a time", `{"block":"turns","scope":{"tenant":"acme","agent":"billing"},"reason":" runaway ","expiresAt":"2026-12-02T08:00:00+01:00"}`,
			store.KillSwitch{Block: "turns", Tools: []string{}, Tenant: "acme", Agent: "billing", Reason: "runaway", ExpiresAt: t0.Add(time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := switchOf(t, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(k.ID, "ks_") || k.CreatedBy != "oncall" || !k.CreatedAt.Equal(t0) {
				t.Errorf("switch %+v: want an ks_ id, createdBy oncall, createdAt now", k)
			}
			tt.want.ID, tt.want.CreatedBy, tt.want.CreatedAt = k.ID, k.CreatedBy, k.CreatedAt
			if got, want := mustJSON(t, k), mustJSON(t, tt.want); got != want {
				t.Errorf("switch\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"search", "search", true},
		{"search", "search2", false},
		{"send_*", "send_email", true},
		{"send_*", "send_", true},
		{"send_*", "resend_email", false},
		{"*", "anything", true},
		{"*_post", "http_post", true},
		{"http_?ost", "http_post", true},
		{"http_?ost", "http_ost", false},
		{"*a*b*c", "xaxxbxxc", true},
		{"*a*b*c", "xaxxbxxcx", false},
		{"files__*", "files__read", true},
		{"???", "héé", true},
		{strings.Repeat("*a", 30), strings.Repeat("a", 30) + "b", false},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// FuzzSpec: any body either sets a switch that matches what it names or
// is refused with a *FieldError; never a panic.
func FuzzSpec(f *testing.F) {
	for _, seed := range []string{`{"block":"tools","tools":["send_*"],"reason":"r"}`, `{"block":"turns","scope":{"agent":"support"},"reason":"r","expiresIn":"1h"}`,
		`{"block":"tools","tools":["*?*"],"reason":"x","allowUnknownTools":true}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var sp Spec
		if json.Unmarshal(body, &sp) != nil {
			return
		}
		k, err := sp.Switch(known, "fuzz", t0)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			return
		}
		if !sp.AllowUnknownTools {
			for _, p := range k.Tools {
				matched := false
				for _, tool := range known.Tools {
					matched = matched || Match(p, tool)
				}
				if !matched {
					t.Fatalf("switch of %q stops none of the known tools", p)
				}
			}
		}
	})
}

// recorded collects decision records and counts.
type recorded struct {
	mu      sync.Mutex
	records []*policy.Record
	stops   []string
}

func (r *recorded) record(x *policy.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, x)
}
func (r *recorded) stopped(what, scope string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops = append(r.stops, what+"/"+scope)
}

func openSwitches(t *testing.T, path string, c *fakeclock.Clock, rec *recorded) (*Switches, store.Store) {
	t.Helper()
	st, err := store.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Store: st, Now: c.Now, Record: rec.record, Stopped: rec.stopped})
	if err := s.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, st
}

func set(t *testing.T, s *Switches, body string, now time.Time) *store.KillSwitch {
	t.Helper()
	var sp Spec
	if err := json.Unmarshal([]byte(body), &sp); err != nil {
		t.Fatal(err)
	}
	k, err := sp.Switch(known, "oncall", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return k
}

func toolCall(tenant, agent, tool string) *engine.ToolCallContext {
	return &engine.ToolCallContext{Identity: engine.Identity{RequestID: "req_1", SessionID: "s1", Agent: agent,
		Principal: engine.Principal{Tenant: tenant, Subject: "u"}}, ToolCallID: "call_1", ToolName: tool, StepNumber: 1}
}

// TestSwitchesStopWhatTheyName: a switch stops the calls it names in its
// scope and nothing else, with the fixed reason, a decision record naming
// it and a count; it survives a restart; its expiry lifts it (injected
// clock); a lift lifts it.
func TestSwitchesStopWhatTheyName(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "turngate.db")
	c := fakeclock.New(t0)
	rec := &recorded{}
	s, st := openSwitches(t, path, c, rec)
	mail := set(t, s, `{"block":"tools","tools":["send_*"],"scope":{"tenant":"acme"},"reason":"exfiltration","expiresIn":"30m"}`, c.Now())
	turns := set(t, s, `{"block":"turns","scope":{"agent":"billing"},"reason":"runaway"}`, c.Now())

	h := s.Hooks()
	cases := []struct {
		tenant, agent, tool string
		stopped             bool
	}{
		{"acme", "support", "send_email", true},
		{"acme", "billing", "send_sms", true},
		{"acme", "support", "search", false},
		{"globex", "support", "send_email", false},
	}
	for _, cc := range cases {
		d, err := h.BeforeToolCall(ctx, toolCall(cc.tenant, cc.agent, cc.tool))
		if err != nil {
			t.Fatal(err)
		}
		if got := d != nil && d.Action == engine.ActionBlock && d.Reason == ToolReason; got != cc.stopped {
			t.Errorf("%s/%s calls %s: decision %+v, stopped want %v", cc.tenant, cc.agent, cc.tool, d, cc.stopped)
		}
	}
	if len(rec.records) != 2 {
		t.Fatalf("%d decision records, want 2 (one per stopped call)", len(rec.records))
	}
	r := rec.records[0]
	if r.Hook != policy.HookBeforeToolCall || r.Outcome != policy.OutcomeMatched || r.RulesFired[0] != "killswitch/"+mail.ID ||
		r.ToolName != "send_email" || r.Tenant != "acme" || r.ToolCallID != "call_1" {
		t.Errorf("decision record %+v: want a matched beforeToolCall naming %s", r, RuleName(mail))
	}
	if err := s.CheckTurn(&toolCall("acme", "billing", "").Identity); !errors.As(err, new(*StoppedError)) {
		t.Errorf("turn of billing: %v, want a *StoppedError", err)
	}
	if err := s.CheckTurn(&toolCall("acme", "support", "").Identity); err != nil {
		t.Errorf("turn of support: %v, want none", err)
	}
	if got := strings.Join(rec.stops, " "); got != "tool_call/tenant tool_call/tenant turn/agent" {
		t.Errorf("counted stops %q", got)
	}

	// A restart: a new process reads the same switches.
	st.Close()
	s, st = openSwitches(t, path, c, rec)
	defer st.Close()
	if got := len(s.Active()); got != 2 {
		t.Fatalf("after a restart %d switches in force, want 2", got)
	}
	// The expiry lifts the mail switch by itself, at its time to the
	// nanosecond, with no read of the store.
	c.Advance(30*time.Minute - time.Nanosecond)
	if s.ToolCall("acme", "support", "send_email") == nil {
		t.Error("a nanosecond before its expiry the switch no longer stops")
	}
	c.Advance(time.Nanosecond)
	if k := s.ToolCall("acme", "support", "send_email"); k != nil {
		t.Errorf("at its expiry the switch %s still stops", k.ID)
	}
	if got := len(s.Active()); got != 1 {
		t.Errorf("%d switches in force after the expiry, want 1", got)
	}
	if _, err := s.Lift(ctx, turns.ID); err != nil {
		t.Fatal(err)
	}
	if s.Turn("acme", "billing") != nil || len(s.Active()) != 0 {
		t.Errorf("after the lift: %v in force", s.Active())
	}
	if _, err := s.Lift(ctx, turns.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("lifting twice: %v, want ErrNotFound", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestRun: Run applies another process's switch at the next Wake (the
// notification), and without one at the next poll (the fallback of a
// replica that missed its notification).
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		poll    time.Duration
		wake    bool
		body    string
		stopped func(*Switches) bool
	}{
		{"on wake", time.Hour, true, `{"block":"tools","reason":"all"}`, func(b *Switches) bool { return b.ToolCall("acme", "support", "search") != nil }},
		{"by polling", time.Millisecond, false, `{"block":"turns","reason":"all"}`, func(b *Switches) bool { return b.Turn("acme", "support") != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeclock.New(t0)
			a, st := openSwitches(t, filepath.Join(t.TempDir(), "turngate.db"), c, &recorded{})
			defer st.Close()
			b := New(Options{Store: st, Now: c.Now})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); b.Run(ctx, tc.poll) }()
			set(t, a, tc.body, c.Now())
			if tc.wake {
				b.Wake()
			}
			for !tc.stopped(b) {
				time.Sleep(time.Millisecond) // bounded by the test's timeout; no timed assertion
			}
			cancel()
			<-done
		})
	}
}
