package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // quotas' time zones load on machines without a zoneinfo database

	"github.com/turngate/turngate/internal/suggest"
)

// Quota is one usage limit of the quotas list, written without Rego: at
// most Turns turns, or InputTokens or OutputTokens tokens, per Window, for
// each key of Per (a tenant, a principal, an agent, or a combination),
// optionally only for one Tenant or Agent. The gateway counts them in the
// store (declared state, exact across replicas): a turn over a limit is
// refused before its model is called, and a turn whose token budget runs
// out stops at its next step.
type Quota struct {
	// Name names the quota in refusals, audit records and metrics.
	Name string `yaml:"name"`
	// Per is the key counted: tenant, principal (a tenant's subject) or
	// agent, or parts joined by "+" (tenant+agent).
	Per string `yaml:"per"`
	// Tenant and Agent, when set, apply the quota only to that tenant's,
	// that agent's turns.
	Tenant string `yaml:"tenant"`
	Agent  string `yaml:"agent"`
	// Exactly one of Turns, InputTokens, OutputTokens is the limit.
	Turns        int64 `yaml:"turns"`
	InputTokens  int64 `yaml:"inputTokens"`
	OutputTokens int64 `yaml:"outputTokens"`
	// Window is hour, day or month (a calendar period in TimeZone), or a
	// duration ("1m", "10s") for a sliding window.
	Window string `yaml:"window"`
	// TimeZone is a calendar window's IANA time zone (default UTC).
	TimeZone string `yaml:"timeZone"`
}

// Quota scope parts (Per).
const (
	QuotaPerTenant    = "tenant"
	QuotaPerPrincipal = "principal"
	QuotaPerAgent     = "agent"
)

// Quota calendar windows.
const (
	QuotaHour  = "hour"
	QuotaDay   = "day"
	QuotaMonth = "month"
)

// quotaName matches a quota's name: it is a metric label and part of the
// state's name.
var quotaName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// Bounds of a sliding quota window.
const (
	minQuotaWindow = time.Second
	maxQuotaWindow = 31 * 24 * time.Hour
)

// QuotaParts returns q's Per parts, in the order written.
func (q *Quota) QuotaParts() []string { return strings.Split(q.Per, "+") }

// Limit returns what q limits ("turns", "inputTokens", "outputTokens") and
// its bound.
func (q *Quota) Limit() (what string, limit int64) {
	switch {
	case q.Turns > 0:
		return "turns", q.Turns
	case q.InputTokens > 0:
		return "inputTokens", q.InputTokens
	}
	return "outputTokens", q.OutputTokens
}

// SlidingWindow returns a sliding window's length, 0 for a calendar one.
func (q *Quota) SlidingWindow() time.Duration {
	switch q.Window {
	case QuotaHour, QuotaDay, QuotaMonth:
		return 0
	}
	d, _ := time.ParseDuration(q.Window)
	return d
}

// Location returns a calendar window's time zone (UTC by default).
func (q *Quota) Location() *time.Location {
	if q.TimeZone == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(q.TimeZone)
	if err != nil {
		return time.UTC // Validate refused it
	}
	return loc
}

// validateQuotas reports the quotas that do not fit: each must name what
// it limits, per what key and window, so that none is silently inactive.
func (c *Config) validateQuotas(add func(path, format string, args ...any)) {
	names := map[string]bool{}
	agents := map[string]bool{}
	for _, a := range c.Agents {
		agents[a.Name] = true
	}
	for i, q := range c.Quotas {
		item := fmt.Sprintf("quotas[%d]", i)
		switch {
		case q.Name == "":
			add(item+".name", "%s: name is required", item)
		case !quotaName.MatchString(q.Name):
			add(item+".name", "%s: name %q must be 1-63 lower-case letters, digits, _ and -, starting with a letter", item, q.Name)
		case names[strings.ReplaceAll(q.Name, "-", "_")]:
			add(item+".name", "%s: duplicate quota %q (- and _ count as one)", item, q.Name)
		}
		names[strings.ReplaceAll(q.Name, "-", "_")] = true
		label := fmt.Sprintf("%s (%s)", item, q.Name)
		q.validatePer(item, label, add)
		set := 0
		for _, f := range []struct {
			key string
			v   int64
		}{{"turns", q.Turns}, {"inputTokens", q.InputTokens}, {"outputTokens", q.OutputTokens}} {
			if f.v < 0 {
				add(item+"."+f.key, "%s: %s must be positive, not %d", label, f.key, f.v)
			}
			if f.v != 0 {
				set++
			}
		}
		if set != 1 {
			add(item, "%s: set exactly one of turns, inputTokens and outputTokens (the limit), not %d", label, set)
		}
		q.validateWindow(item, label, add)
		if q.Agent != "" && !agents[q.Agent] {
			add(item+".agent", "%s: unknown agent %q%s", label, q.Agent, didYouMeanOf(q.Agent, slices.Sorted(maps.Keys(agents))))
		}
		if tenants := c.Tenants(); q.Tenant != "" && !slices.Contains(tenants, q.Tenant) {
			add(item+".tenant", "%s: no API key is of tenant %q%s: the quota would limit no one", label, q.Tenant, didYouMeanOf(q.Tenant, tenants))
		}
	}
}

// DefaultTenant is the tenant of every request to a gateway without API
// keys.
const DefaultTenant = "default"

// Tenants returns the tenants a request can belong to, sorted: those of
// auth.apiKeys and auth.jwt, or "default" (every request's tenant) without
// either. A quota or kill switch for another tenant would apply to no one.
func (c *Config) Tenants() []string {
	if !c.Authenticated() {
		return []string{DefaultTenant}
	}
	seen := map[string]bool{}
	for _, k := range c.Auth.APIKeys {
		seen[k.Tenant] = true
	}
	for _, t := range c.Auth.JWT.tenants() {
		seen[t] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func (q *Quota) validatePer(item, label string, add func(path, format string, args ...any)) {
	if q.Per == "" {
		add(item+".per", "%s: per is required: tenant, principal, agent, or parts joined by + (tenant+agent)", label)
		return
	}
	seen := map[string]bool{}
	for _, p := range q.QuotaParts() {
		switch p {
		case QuotaPerTenant, QuotaPerPrincipal, QuotaPerAgent:
		default:
			add(item+".per", "%s: per: %q is not tenant, principal or agent%s", label, p,
				didYouMeanOf(p, []string{QuotaPerTenant, QuotaPerPrincipal, QuotaPerAgent}))
			continue
		}
		if seen[p] {
			add(item+".per", "%s: per: %q is named twice", label, p)
		}
		seen[p] = true
	}
}

func (q *Quota) validateWindow(item, label string, add func(path, format string, args ...any)) {
	switch q.Window {
	case "":
		add(item+".window", "%s: window is required: hour, day, month or a duration such as 1m", label)
		return
	case QuotaHour, QuotaDay, QuotaMonth:
		if q.TimeZone != "" {
			if _, err := time.LoadLocation(q.TimeZone); err != nil {
				add(item+".timeZone", "%s: timeZone: %q is not an IANA time zone (Europe/Berlin, UTC)", label, q.TimeZone)
			}
		}
		return
	}
	d, err := time.ParseDuration(q.Window)
	switch {
	case err != nil:
		add(item+".window", "%s: window %q is not hour, day, month or a duration such as 1m%s", label, q.Window,
			didYouMeanOf(q.Window, []string{QuotaHour, QuotaDay, QuotaMonth}))
	case d < minQuotaWindow || d > maxQuotaWindow:
		add(item+".window", "%s: window %s must be between %s and %s", label, q.Window, minQuotaWindow, "744h (31 days)")
	case q.TimeZone != "":
		add(item+".timeZone", "%s: timeZone applies to the calendar windows hour, day and month, not to a sliding %s", label, q.Window)
	}
}

// didYouMeanOf returns ` (did you mean "x"?)` for the name closest to s.
func didYouMeanOf(s string, names []string) string {
	if best := suggest.Closest(s, names); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
