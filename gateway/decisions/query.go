package decisions

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/suggest"
	"github.com/turngate/turngate/policy"
)

// Page sizes of the list: DefaultLimit when limit is not given, at most
// MaxLimit.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// maxValue bounds a filter's value: longer than any id or name the
// gateway stores.
const maxValue = 512

// Hooks are the hooks whose records the store keeps, the values of the
// hook filter, in execution order.
var Hooks = []string{policy.HookBeforeTurn, policy.HookBeforeStep, policy.HookBeforeToolCall, audit.KindAfterToolCall,
	policy.HookToolResult, audit.KindOnStepFinish, policy.HookBeforePersist, policy.HookOnChatError, audit.KindOnChatResponse}

// Outcomes are the values of the outcome filter: a decision record's
// outcome.
var Outcomes = []string{policy.OutcomeMatched, policy.OutcomeNoMatch, policy.OutcomeNotEvaluated, policy.OutcomeError}

// Actions are the values of the action filter: a beforeToolCall's action
// and an afterToolCall's decision.
var Actions = []string{engine.ActionAllow, engine.ActionBlock, engine.ActionSubstitute, engine.ActionApproval,
	engine.DecisionRewrite, engine.DecisionError, engine.DecisionClient}

// params are the query parameters of the list.
var params = []string{"since", "until", "tenant", "agent", "session", "turn", "tool", "hook", "outcome", "action",
	"rule", "revision", "shadowChanged", "limit", "cursor", "order"}

// ParamError is a query parameter the list refuses.
type ParamError struct {
	// Param names the parameter.
	Param   string
	Message string
}

func (e *ParamError) Error() string { return "query parameter " + e.Param + ": " + e.Message }

func paramErr(param, format string, args ...any) *ParamError {
	return &ParamError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// Scope is whose records a caller may see.
type Scope struct {
	// AllTenants lets a global admin see every tenant's records; else
	// only Tenant's.
	AllTenants bool
	Tenant     string
}

// Sees reports whether the scope sees a record of tenant.
func (s Scope) Sees(tenant string) bool { return s.AllTenants || s.Tenant == tenant }

// Query is a parsed list request.
type Query struct {
	store.DecisionQuery
	// None is set when the query can select nothing the caller may see
	// (a tenant admin asking for another tenant): the store is not asked.
	None bool
}

// ParseQuery parses the list's query parameters strictly: an unknown
// parameter (with a did-you-mean), a repeated one, a value that does not
// parse or is not one of a closed set is a *ParamError naming it.
func ParseQuery(v url.Values, scope Scope) (*Query, error) {
	q := &Query{DecisionQuery: store.DecisionQuery{Limit: DefaultLimit}}
	for _, name := range slices.Sorted(maps.Keys(v)) {
		if !slices.Contains(params, name) {
			msg := "is not a parameter of this list (it takes " + strings.Join(params, ", ") + ")"
			if s := suggest.Closest(name, params); s != "" {
				msg = fmt.Sprintf("is not a parameter of this list; did you mean %q?", s)
			}
			return nil, paramErr(name, "%s", msg)
		}
		if len(v[name]) != 1 {
			return nil, paramErr(name, "is given %d times; give it once", len(v[name]))
		}
		val := v[name][0]
		if err := checkValue(name, val); err != nil {
			return nil, err
		}
		if err := q.set(name, val); err != nil {
			return nil, err
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return nil, paramErr("until", "must be after since")
	}
	if !scope.AllTenants {
		if q.Tenant != "" && q.Tenant != scope.Tenant {
			q.None = true
		}
		q.Tenant = scope.Tenant
	}
	return q, nil
}

// checkValue refuses a value no record can hold: too long, not UTF-8, or
// with control characters.
func checkValue(name, val string) error {
	switch {
	case len(val) > maxValue:
		return paramErr(name, "is longer than %d bytes", maxValue)
	case !utf8.ValidString(val):
		return paramErr(name, "is not UTF-8")
	case strings.IndexFunc(val, unicode.IsControl) >= 0:
		return paramErr(name, "holds a control character")
	case val == "" && name != "cursor":
		return paramErr(name, "is empty; leave it out to select every value")
	}
	return nil
}

// set sets the parameter name of q to val.
func (q *Query) set(name, val string) error {
	switch name {
	case "since", "until":
		t, err := time.Parse(time.RFC3339Nano, val)
		if err != nil {
			return paramErr(name, "must be an RFC 3339 time such as 2026-12-01T10:00:00Z, not %q", val)
		}
		if name == "since" {
			q.Since = t
		} else {
			q.Until = t
		}
	case "tenant":
		q.Tenant = val
	case "agent":
		q.Agent = val
	case "session":
		q.SessionID = val
	case "turn":
		q.RequestID = val
	case "tool":
		q.Tool = val
	case "rule":
		q.Rule = val
	case "revision":
		q.Revision = val
	case "hook":
		return oneOf(name, val, Hooks, &q.Hook)
	case "outcome":
		return oneOf(name, val, Outcomes, &q.Outcome)
	case "action":
		return oneOf(name, val, Actions, &q.Action)
	case "shadowChanged":
		b, err := strconv.ParseBool(val)
		if err != nil || (val != "true" && val != "false") {
			return paramErr(name, "must be true or false, not %q", val)
		}
		q.ShadowChanged = &b
	case "limit":
		n, err := strconv.Atoi(val)
		if err != nil || n < 1 || n > MaxLimit {
			return paramErr(name, "must be a whole number from 1 to %d, not %q", MaxLimit, val)
		}
		q.Limit = n
	case "order":
		var order string
		if err := oneOf(name, val, []string{"desc", "asc"}, &order); err != nil {
			return err
		}
		q.Ascending = order == "asc"
	case "cursor":
		if val == "" {
			return nil // the first page
		}
		k, err := decodeCursor(val)
		if err != nil {
			return paramErr(name, "is not a cursor this list gave (use the page's \"next\" as it is)")
		}
		q.After = k
	}
	return nil
}

// oneOf sets *dst to val when it is one of names, else refuses it with the
// closest name.
func oneOf(param, val string, names []string, dst *string) error {
	if slices.Contains(names, val) {
		*dst = val
		return nil
	}
	if s := suggest.Closest(val, names); s != "" {
		return paramErr(param, "%q is not one of %s; did you mean %q?", val, strings.Join(names, ", "), s)
	}
	return paramErr(param, "%q is not one of %s", val, strings.Join(names, ", "))
}

// cursorVersion starts every cursor, so that a later form can tell.
const cursorVersion = "d1"

// encodeCursor renders a row's place in a list as an opaque cursor.
func encodeCursor(k store.DecisionKey) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%s.%d.%d", cursorVersion, k.Time.UnixNano(), k.ID))
}

// decodeCursor parses a cursor of encodeCursor.
func decodeCursor(s string) (*store.DecisionKey, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[0] != cursorVersion {
		return nil, errors.New("not a cursor")
	}
	at, err1 := strconv.ParseInt(parts[1], 10, 64)
	id, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || id < 0 {
		return nil, errors.New("not a cursor")
	}
	return &store.DecisionKey{Time: time.Unix(0, at).UTC(), ID: id}, nil
}

// Entry is one record as the admin API lists it.
type Entry struct {
	ID            string          `json:"id"`
	Time          time.Time       `json:"time"`
	Hook          string          `json:"hook"`
	Tenant        string          `json:"tenant"`
	Agent         string          `json:"agent"`
	Session       string          `json:"session"`
	Turn          string          `json:"turn"`
	Step          *int            `json:"step,omitempty"`
	Tool          string          `json:"tool,omitempty"`
	ToolCallID    string          `json:"toolCallId,omitempty"`
	Outcome       string          `json:"outcome"`
	Action        string          `json:"action,omitempty"`
	RulesFired    []string        `json:"rulesFired"`
	Revision      string          `json:"revision"`
	ShadowChanged bool            `json:"shadowChanged"`
	Record        json.RawMessage `json:"record"`
}

// NewEntry renders a stored row.
func NewEntry(r *store.DecisionRow) Entry {
	rules := r.RulesFired
	if rules == nil {
		rules = []string{}
	}
	return Entry{ID: store.FormatDecisionID(r.ID), Time: r.Time, Hook: r.Hook, Tenant: r.Tenant, Agent: r.Agent,
		Session: r.SessionID, Turn: r.RequestID, Step: r.Step, Tool: r.Tool, ToolCallID: r.ToolCallID, Outcome: r.Outcome,
		Action: r.Action, RulesFired: rules, Revision: r.Revision, ShadowChanged: r.ShadowChanged, Record: r.Record}
}

// ListPage is one page of the list.
type ListPage struct {
	Decisions []Entry `json:"decisions"`
	// Next is the cursor of the next page; empty on the last one.
	Next string `json:"next,omitempty"`
}

// List returns the page q selects.
func List(ctx context.Context, st store.Decisions, q *Query) (*ListPage, error) {
	page := &ListPage{Decisions: []Entry{}}
	if q.None {
		return page, nil
	}
	rows, err := st.QueryDecisions(ctx, q.DecisionQuery)
	if err != nil {
		return nil, err
	}
	for i := range rows {
		page.Decisions = append(page.Decisions, NewEntry(&rows[i]))
	}
	if len(rows) == q.Limit {
		page.Next = encodeCursor(rows[len(rows)-1].Key())
	}
	return page, nil
}

// ErrNotFound answers for a missing record and for another tenant's.
var ErrNotFound = errors.New("decision not found")

// Get returns the record id (as Entry.ID names it) when scope sees it,
// else ErrNotFound.
func Get(ctx context.Context, st store.Decisions, id string, scope Scope) (*Entry, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 1 || store.FormatDecisionID(n) != id {
		return nil, ErrNotFound
	}
	row, err := st.GetDecision(ctx, n)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if !scope.Sees(row.Tenant) {
		return nil, ErrNotFound
	}
	e := NewEntry(row)
	return &e, nil
}
