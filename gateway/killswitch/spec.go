package killswitch

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/suggest"
)

// Spec is the body of POST /v1/admin/killswitch: what to stop, where, why
// and until when.
type Spec struct {
	// Block is "tools" (tool calls: those Tools names, or all) or "turns"
	// (every turn, refused before its model is called).
	Block string `json:"block"`
	// Tools are tool names and patterns (* any run of characters, ? one
	// character); empty: every tool. Only with block "tools".
	Tools []string `json:"tools,omitempty"`
	// AllowUnknownTools accepts names and patterns that match none of the
	// tools the gateway knows now (a client tool of an OpenAI request, an
	// MCP tool whose server is down). Without it such an entry is refused:
	// a misspelt name would stop nothing.
	AllowUnknownTools bool `json:"allowUnknownTools,omitempty"`
	// Scope narrows the switch; empty: the whole fleet.
	Scope Scope `json:"scope"`
	// Reason is required: it goes to the audit log, never to the model.
	Reason string `json:"reason"`
	// ExpiresAt or ExpiresIn (a Go duration such as "30m"), at most one,
	// lifts the switch by itself.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	ExpiresIn string     `json:"expiresIn,omitempty"`
}

// Scope is where a switch applies: one tenant, one agent, one agent of
// one tenant, or (both empty) everywhere.
type Scope struct {
	Tenant string `json:"tenant,omitempty"`
	Agent  string `json:"agent,omitempty"`
}

// Known is what a Spec is checked against: the configured agents and
// tenants (those of the API keys) and the tools the gateway knows.
type Known struct {
	Agents  []string
	Tenants []string
	Tools   []string
}

// Limits of a Spec.
const (
	maxReason    = 1000
	maxTools     = 100
	maxPattern   = 200
	maxScopeText = 256
	// maxExpiry bounds how far ahead an expiry may be: a typo in a unit
	// must not make a temporary switch last for ever.
	maxExpiry = 366 * 24 * time.Hour
)

// FieldError is a Spec's refusal: the field and what is wrong with it.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return "field " + e.Field + ": " + e.Message }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Switch checks sp against known at now and returns the switch it sets,
// set by subject; a *FieldError names what is wrong. Every entry must
// mean something: an unknown block or agent, a malformed pattern, or a
// pattern that matches no known tool (unless AllowUnknownTools) is
// refused, never stored as a switch that stops nothing; so is a tenant no
// API key is of.
func (sp *Spec) Switch(known Known, subject string, now time.Time) (*store.KillSwitch, error) {
	k := &store.KillSwitch{ID: "ks_" + uuid.NewString(), Block: sp.Block, Tenant: sp.Scope.Tenant, Agent: sp.Scope.Agent,
		Reason: strings.TrimSpace(sp.Reason), CreatedBy: subject, CreatedAt: now, Tools: []string{}}
	switch sp.Block {
	case store.KillTools:
	case store.KillTurns:
		if len(sp.Tools) > 0 {
			return nil, fieldErr("tools", `applies only to block "tools": block "turns" stops every turn`)
		}
	case "":
		return nil, fieldErr("block", `is required: "tools" or "turns"`)
	default:
		return nil, fieldErr("block", "%q is not %q or %q%s", sp.Block, store.KillTools, store.KillTurns, didYouMean(sp.Block, []string{store.KillTools, store.KillTurns}))
	}
	if err := checkTools(sp.Tools, sp.AllowUnknownTools, known.Tools); err != nil {
		return nil, err
	}
	k.Tools = append(k.Tools, sp.Tools...)
	if err := checkText("scope.tenant", sp.Scope.Tenant, maxScopeText); err != nil {
		return nil, err
	}
	if t := sp.Scope.Tenant; t != "" && !slices.Contains(known.Tenants, t) {
		return nil, fieldErr("scope.tenant", "no API key is of tenant %q%s", t, didYouMean(t, known.Tenants))
	}
	if a := sp.Scope.Agent; a != "" && !slices.Contains(known.Agents, a) {
		return nil, fieldErr("scope.agent", "no agent is named %q%s", a, didYouMean(a, known.Agents))
	}
	if k.Reason == "" {
		return nil, fieldErr("reason", "is required: say why, for the audit log")
	}
	if err := checkText("reason", k.Reason, maxReason); err != nil {
		return nil, err
	}
	exp, err := sp.expiry(now)
	if err != nil {
		return nil, err
	}
	k.ExpiresAt = exp
	return k, nil
}

// expiry returns when the switch lifts itself, zero for never.
func (sp *Spec) expiry(now time.Time) (time.Time, error) {
	switch {
	case sp.ExpiresAt != nil && sp.ExpiresIn != "":
		return time.Time{}, fieldErr("expiresIn", "set expiresAt or expiresIn, not both")
	case sp.ExpiresAt != nil:
		at := sp.ExpiresAt.UTC()
		if !at.After(now) {
			return time.Time{}, fieldErr("expiresAt", "%s is not in the future", at.Format(time.RFC3339))
		}
		if at.Sub(now) > maxExpiry {
			return time.Time{}, fieldErr("expiresAt", "%s is more than a year ahead; omit it for a switch lifted by hand", at.Format(time.RFC3339))
		}
		return at, nil
	case sp.ExpiresIn != "":
		d, err := time.ParseDuration(sp.ExpiresIn)
		if err != nil {
			return time.Time{}, fieldErr("expiresIn", "%q is not a duration such as \"30m\" or \"2h\"", sp.ExpiresIn)
		}
		if d <= 0 {
			return time.Time{}, fieldErr("expiresIn", "%q must be positive", sp.ExpiresIn)
		}
		if d > maxExpiry {
			return time.Time{}, fieldErr("expiresIn", "%q is more than a year; omit it for a switch lifted by hand", sp.ExpiresIn)
		}
		return now.Add(d), nil
	}
	return time.Time{}, nil
}

// checkTools checks the tools of a switch: well-formed patterns, each
// matching a known tool unless allowUnknown.
func checkTools(patterns []string, allowUnknown bool, known []string) error {
	if len(patterns) > maxTools {
		return fieldErr("tools", "has %d entries, more than %d", len(patterns), maxTools)
	}
	for i, p := range patterns {
		field := fmt.Sprintf("tools[%d]", i)
		if err := checkPattern(p); err != nil {
			return fieldErr(field, "%q %s", p, err.Error())
		}
		if allowUnknown || slices.ContainsFunc(known, func(name string) bool { return Match(p, name) }) {
			continue
		}
		return fieldErr(field, "%q matches none of the gateway's tools%s; set allowUnknownTools for a tool it does not know yet (a client tool, an MCP tool of a server that is down)",
			p, didYouMean(p, known))
	}
	return nil
}

// checkPattern checks one tool name or pattern.
func checkPattern(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("is empty")
	case len(p) > maxPattern:
		return fmt.Errorf("is longer than %d bytes", maxPattern)
	case !utf8.ValidString(p):
		return fmt.Errorf("is not UTF-8")
	}
	for _, r := range p {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("holds a space or control character; tool names have none")
		}
		if strings.ContainsRune(`[]{}\`, r) {
			return fmt.Errorf("uses %q: patterns have only * (any run of characters) and ? (one character)", r)
		}
	}
	return nil
}

// CheckLiftReason checks the optional reason given for lifting a switch
// as a switch's own reason is checked (its length, one line, no control
// characters); a *FieldError names what is wrong.
func CheckLiftReason(reason string) error { return checkText("reason", reason, maxReason) }

// checkText checks free text of a switch: one line of UTF-8 without
// control characters, since turngate killswitch list prints it to an
// operator's terminal (an escape sequence there could rewrite the table).
func checkText(field, s string, limit int) error {
	switch {
	case len(s) > limit:
		return fieldErr(field, "is longer than %d bytes", limit)
	case !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl):
		return fieldErr(field, "is not one line of UTF-8 text without control characters")
	}
	return nil
}

// Match reports whether name matches pattern: * matches any run of
// characters (none too), ? exactly one, anything else itself.
func Match(pattern, name string) bool {
	p, n := []rune(pattern), []rune(name)
	// The classic greedy matcher with one backtrack point: linear in
	// practice, never exponential.
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// didYouMean returns ` (did you mean "x"?)` for the candidate closest to
// s, or "" when none is close.
func didYouMean(s string, candidates []string) string {
	if best := suggest.Closest(s, candidates); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}
