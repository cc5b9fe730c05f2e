package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Retention erases sessions idle longer than configured (gateway/erasure):
// per tenant here, per agent in the agent's retention. A session that both
// name is kept for the shorter of the two. Each retention is a whole number
// of days such as 30d, or a duration such as 36h, at least
// MinSessionRetention.
type Retention struct {
	// Tenants maps a configured tenant to how long its idle sessions are
	// kept.
	Tenants map[string]string `yaml:"tenants"`
}

// MinSessionRetention is the shortest retention: a shorter one would erase
// a session between the turns of a conversation still going on.
const MinSessionRetention = time.Hour

// ParseRetention parses a retention: a whole number of days ("30d") or a
// Go duration ("36h", "90m").
func ParseRetention(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > 36500 || days[0] == '+' {
			return 0, fmt.Errorf("%q is not a retention: write a whole number of days such as 30d, or a duration such as 36h", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a retention: write a whole number of days such as 30d, or a duration such as 36h", s)
	}
	if d < MinSessionRetention {
		return 0, fmt.Errorf("%q is shorter than an hour, the shortest retention", s)
	}
	return d, nil
}

// TenantRetention returns the tenants' retentions (Validate checked them).
func (c *Config) TenantRetention() map[string]time.Duration {
	out := map[string]time.Duration{}
	for t, s := range c.Retention.Tenants {
		out[t], _ = ParseRetention(s)
	}
	return out
}

// AgentRetention returns the retentions of the agents that set one.
func (c *Config) AgentRetention() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, a := range c.Agents {
		if a.Retention != "" {
			out[a.Name], _ = ParseRetention(a.Retention)
		}
	}
	return out
}

// validateRetention reports a retention that does not parse, and a tenant
// that is not configured.
func (c *Config) validateRetention(add func(path, format string, args ...any)) {
	for i, a := range c.Agents {
		if a.Retention == "" {
			continue
		}
		if _, err := ParseRetention(a.Retention); err != nil {
			add(fmt.Sprintf("agents[%d].retention", i), "agents[%d] (%s): retention: %v", i, a.Name, err)
		}
	}
	tenants := c.Tenants()
	for _, t := range slices.Sorted(maps.Keys(c.Retention.Tenants)) {
		item := keyPath("retention.tenants", t)
		if !slices.Contains(tenants, t) {
			add(item, "%s: %q is not a configured tenant (one of an API key or of auth.jwt.tenants)%s", item, t, didYouMeanOf(t, tenants))
			continue
		}
		if _, err := ParseRetention(c.Retention.Tenants[t]); err != nil {
			add(item, "%s: %v", item, err)
		}
	}
}
