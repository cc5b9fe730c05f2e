package quota

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/policy/state"
)

// TestNewDeclares: each quota becomes the declared state that counts what
// it limits, per its key and window.
func TestNewDeclares(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	q, err := New([]config.Quota{
		{Name: "user-turns", Per: "principal", Turns: 30, Window: "1m"},
		{Name: "tenant-output", Per: "tenant+agent", OutputTokens: 9, Window: "day", TimeZone: "Europe/Berlin"},
		{Name: "in", Per: "agent", Agent: "a", InputTokens: 5, Window: "month"},
	}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		kind  state.Kind
		of    state.Source
		scope []state.ScopePart
		win   state.Window
		outc  []string
	}{
		{"quota_user_turns", state.Count, state.Turns, []state.ScopePart{{Kind: state.ScopePrincipal}}, state.Window{Within: time.Minute}, []string{state.OutcomeAdmitted}},
		{"quota_tenant_output", state.Sum, state.OutputTokens, []state.ScopePart{{Kind: state.ScopeTenant}, {Kind: state.ScopeAgent}},
			state.Window{Calendar: state.Day, Location: berlin}, nil},
		{"quota_in", state.Sum, state.InputTokens, []state.ScopePart{{Kind: state.ScopeAgent}}, state.Window{Calendar: state.Month, Location: time.UTC}, nil},
	}
	for i, tt := range tests {
		d := q.all[i].decl
		if d.Name != tt.name || d.Kind != tt.kind || d.Of != tt.of || len(d.Scope) != len(tt.scope) || d.Window.Within != tt.win.Within ||
			d.Window.Calendar != tt.win.Calendar || d.Window.Location.String() != tt.win.Location.String() || len(d.Outcomes) != len(tt.outc) {
			t.Errorf("quota %d declares %+v, want %+v", i, d, tt)
		}
		for j := range tt.scope {
			if d.Scope[j] != tt.scope[j] {
				t.Errorf("quota %d scope %v, want %v", i, d.Scope, tt.scope)
			}
		}
	}
	if q, err := New(nil, nil, Options{}); q != nil || err != nil {
		t.Errorf("no quotas: %v, %v; want nil, nil", q, err)
	}
}

func TestNumber(t *testing.T) {
	for _, tt := range []struct {
		v    any
		want int64
	}{{json.Number("20"), 20}, {json.Number("19.5"), 20}, {json.Number("0"), 0}, {int64(7), 7}, {float64(2.25), 3}, {nil, 0}} {
		if got := number(tt.v); got != tt.want {
			t.Errorf("number(%v) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

// TestSetLimits: new limits of the same quotas are taken whole; another
// list, another name or another thing limited changes nothing and says
// which quota differs.
func TestSetLimits(t *testing.T) {
	qs := []config.Quota{
		{Name: "turns", Per: "principal", Turns: 30, Window: "1m"},
		{Name: "out", Per: "tenant", OutputTokens: 9, Window: "day"},
	}
	q, err := New(qs, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		qs   []config.Quota
		want string // the error, "" for none
	}{
		{"new limits", []config.Quota{{Name: "turns", Turns: 3}, {Name: "out", OutputTokens: 100}}, ""},
		{"a quota fewer", qs[:1], "quotas: 1 quotas, not 2: needs a restart"},
		{"another thing limited", []config.Quota{{Name: "turns", Turns: 3}, {Name: "out", InputTokens: 100}},
			"quotas[1]: out limiting inputTokens, not out limiting outputTokens: needs a restart"},
		{"renamed", []config.Quota{{Name: "turns2", Turns: 3}, {Name: "out", OutputTokens: 100}},
			"quotas[0]: turns2 limiting turns, not turns limiting turns: needs a restart"},
	} {
		err := q.SetLimits(tt.qs)
		if got := fmt.Sprint(err); (err == nil) != (tt.want == "") || (err != nil && got != tt.want) {
			t.Errorf("%s: SetLimits = %v, want %q", tt.name, err, tt.want)
		}
		if got := *q.limits.Load(); got[0] != 3 || got[1] != 100 {
			t.Errorf("%s: limits %v, want [3 100] (the first case's)", tt.name, got)
		}
	}
	var none *Quotas
	if err := none.SetLimits(nil); err != nil {
		t.Errorf("nil Quotas, no quotas: %v", err)
	}
}
