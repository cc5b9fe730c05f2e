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

// filter is one query parameter of the list: its name, the field of the
// store's query (its column) it sets and how its value parses.
type filter struct {
	name string
	// text, when set, is the string field the value goes to as it is.
	text func(q *store.DecisionQuery) *string
	// values, when set, is the parameter's closed set: another value is
	// refused with the closest one suggested ("did you mean").
	values []string
	// parse, when set, parses the value into q (after values took it);
	// its error is the refusal's message.
	parse func(q *store.DecisionQuery, val string) error
	// emptyOK lets the value be empty.
	emptyOK bool
}

// filters are the list's query parameters, in the order a refusal names
// them; adding a filter is adding its line.
var filters = []filter{
	{name: "since", parse: func(q *store.DecisionQuery, val string) error { return parseTime(val, &q.Since) }},
	{name: "until", parse: func(q *store.DecisionQuery, val string) error { return parseTime(val, &q.Until) }},
	{name: "tenant", text: func(q *store.DecisionQuery) *string { return &q.Tenant }},
	{name: "agent", text: func(q *store.DecisionQuery) *string { return &q.Agent }},
	{name: "session", text: func(q *store.DecisionQuery) *string { return &q.SessionID }},
	{name: "turn", text: func(q *store.DecisionQuery) *string { return &q.RequestID }},
	{name: "tool", text: func(q *store.DecisionQuery) *string { return &q.Tool }},
	{name: "hook", text: func(q *store.DecisionQuery) *string { return &q.Hook }, values: Hooks},
	{name: "outcome", text: func(q *store.DecisionQuery) *string { return &q.Outcome }, values: Outcomes},
	{name: "action", text: func(q *store.DecisionQuery) *string { return &q.Action }, values: Actions},
	{name: "rule", text: func(q *store.DecisionQuery) *string { return &q.Rule }},
	{name: "revision", text: func(q *store.DecisionQuery) *string { return &q.Revision }},
	{name: "shadowChanged", parse: parseShadowChanged},
	{name: "limit", parse: parseLimit},
	{name: "cursor", parse: parseCursor, emptyOK: true}, // empty: the first page
	{name: "order", values: []string{"desc", "asc"}, parse: func(q *store.DecisionQuery, val string) error {
		q.Ascending = val == "asc"
		return nil
	}},
}

// params are the names of filters, as a refusal lists them.
var params = func() []string {
	names := make([]string, len(filters))
	for i, f := range filters {
		names[i] = f.name
	}
	return names
}()

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
		i := slices.IndexFunc(filters, func(f filter) bool { return f.name == name })
		if i < 0 {
			msg := "is not a parameter of this list (it takes " + strings.Join(params, ", ") + ")"
			if s := suggest.Closest(name, params); s != "" {
				msg = fmt.Sprintf("is not a parameter of this list; did you mean %q?", s)
			}
			return nil, paramErr(name, "%s", msg)
		}
		if len(v[name]) != 1 {
			return nil, paramErr(name, "is given %d times; give it once", len(v[name]))
		}
		if err := filters[i].set(&q.DecisionQuery, v[name][0]); err != nil {
			return nil, &ParamError{Param: name, Message: err.Error()}
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

// set sets f's field of q to val, or says why val is refused.
func (f *filter) set(q *store.DecisionQuery, val string) error {
	if err := checkValue(val, f.emptyOK); err != nil {
		return err
	}
	if f.values != nil {
		if err := oneOf(val, f.values); err != nil {
			return err
		}
	}
	if f.text != nil {
		*f.text(q) = val
		return nil
	}
	return f.parse(q, val)
}

// checkValue refuses a value no record can hold: too long, not UTF-8,
// with control characters, or empty unless emptyOK.
func checkValue(val string, emptyOK bool) error {
	switch {
	case len(val) > maxValue:
		return fmt.Errorf("is longer than %d bytes", maxValue)
	case !utf8.ValidString(val):
		return errors.New("is not UTF-8")
	case strings.IndexFunc(val, unicode.IsControl) >= 0:
		return errors.New("holds a control character")
	case val == "" && !emptyOK:
		return errors.New("is empty; leave it out to select every value")
	}
	return nil
}

// parseTime parses an RFC 3339 time into dst.
func parseTime(val string, dst *time.Time) error {
	t, err := time.Parse(time.RFC3339Nano, val)
	if err != nil {
		return fmt.Errorf("must be an RFC 3339 time such as 2026-12-01T10:00:00Z, not %q", val)
	}
	*dst = t
	return nil
}

// parseShadowChanged parses the shadowChanged filter: true or false.
func parseShadowChanged(q *store.DecisionQuery, val string) error {
	b, err := strconv.ParseBool(val)
	if err != nil || (val != "true" && val != "false") {
		return fmt.Errorf("must be true or false, not %q", val)
	}
	q.ShadowChanged = &b
	return nil
}

// parseLimit parses the page size.
func parseLimit(q *store.DecisionQuery, val string) error {
	n, err := strconv.Atoi(val)
	if err != nil || n < 1 || n > MaxLimit {
		return fmt.Errorf("must be a whole number from 1 to %d, not %q", MaxLimit, val)
	}
	q.Limit = n
	return nil
}

// parseCursor parses the cursor of a page before; empty, the first page.
func parseCursor(q *store.DecisionQuery, val string) error {
	if val == "" {
		return nil
	}
	k, err := decodeCursor(val)
	if err != nil {
		return errors.New(`is not a cursor this list gave (use the page's "next" as it is)`)
	}
	q.After = k
	return nil
}

// oneOf refuses val when it is not one of names, with the closest name.
func oneOf(val string, names []string) error {
	if slices.Contains(names, val) {
		return nil
	}
	if s := suggest.Closest(val, names); s != "" {
		return fmt.Errorf("%q is not one of %s; did you mean %q?", val, strings.Join(names, ", "), s)
	}
	return fmt.Errorf("%q is not one of %s", val, strings.Join(names, ", "))
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
