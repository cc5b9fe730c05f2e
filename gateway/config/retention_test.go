package config

import (
	"testing"
	"time"
)

// TestRetentionParses: a tenant's and an agent's retention, in days or as
// a duration, are what the sweeper gets; a retention that does not parse
// is refused (TestErrorPositions has the positioned errors).
func TestRetentionParses(t *testing.T) {
	c, err := Parse("turngate.yaml", []byte(pm+"agents:\n  - {name: a, model: m, retention: 36h}\n  - {name: b, model: m}\nretention: {tenants: {default: 30d}}\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.TenantRetention(); len(got) != 1 || got[DefaultTenant] != 30*24*time.Hour {
		t.Errorf("TenantRetention = %v, want default 720h", got)
	}
	if got := c.AgentRetention(); len(got) != 1 || got["a"] != 36*time.Hour {
		t.Errorf("AgentRetention = %v, want a 36h", got)
	}
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1d", 24 * time.Hour, true}, {"365d", 365 * 24 * time.Hour, true}, {"1h", time.Hour, true}, {"90m", 90 * time.Minute, true},
		{"30x", 0, false}, {"d", 0, false}, {"-1d", 0, false}, {"+3d", 0, false}, {"0d", 0, false}, {"59m", 0, false}, {"1.5d", 0, false}, {"", 0, false},
	} {
		got, err := ParseRetention(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
