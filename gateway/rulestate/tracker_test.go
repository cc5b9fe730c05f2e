package rulestate_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/rulestate"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
	"github.com/turngate/turngate/policy/state"
)

func openSQLite(t testing.TB) store.Store {
	t.Helper()
	st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "state.db"), store.WithSynchronous(store.SynchronousNormal))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// clock is a settable test clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

var alice = engine.Identity{SessionID: "s1", Agent: "demo", Principal: engine.Principal{Tenant: "acme", Subject: "alice"}}

func mustSet(t *testing.T, decls ...*state.Decl) *state.Set {
	t.Helper()
	s, err := state.NewSet(decls...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// payeeDecls declares what both scope tests read: "verified" (a
// verify_payee of the session's payee) and "sends" (send calls per
// sendField of the input), both over the last hour.
func payeeDecls(verifiedName, sendField string) []*state.Decl {
	verified := &state.Decl{Name: verifiedName, Kind: state.HappenedBefore, Of: state.ToolCalls, Tools: []string{"verify_payee"},
		Scope:  []state.ScopePart{{Kind: state.ScopeSession}, {Kind: state.ScopeInput, Field: "payee"}},
		Window: state.Window{Within: time.Hour, Resolution: time.Minute}}
	sends := &state.Decl{Name: "sends", Kind: state.Count, Of: state.ToolCalls, Tools: []string{"send"},
		Scope:  []state.ScopePart{{Kind: state.ScopeInput, Field: sendField}},
		Window: state.Window{Within: time.Hour, Resolution: time.Minute}}
	return []*state.Decl{verified, sends}
}

// admitter returns a function admitting alice's call of tool with input
// on a fresh SQLite tracker reading decls, and returning what it read.
func admitter(t *testing.T, decls ...*state.Decl) func(tool, input string) state.Values {
	set := mustSet(t, decls...)
	tr := rulestate.New(openSQLite(t), rulestate.Options{})
	return func(tool, input string) state.Values {
		t.Helper()
		v, _, err := tr.Admit(context.Background(), &rulestate.Event{Kind: state.EventToolCall, Identity: alice, Tool: tool, Input: json.RawMessage(input)}, decls, set)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestPruneKeepsRowsBounded simulates a week of a call every ten minutes
// with a one-hour window, pruning every hour: the rows never exceed what
// the window and one pruning interval hold, and the count read is the
// window's.
func TestPruneKeepsRowsBounded(t *testing.T) {
	st := openSQLite(t)
	c := &clock{now: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)}
	tr := rulestate.New(st, rulestate.Options{Now: c.Now, PruneBatch: 4})
	d := &state.Decl{Name: "calls_per_hour", Kind: state.Count, Of: state.ToolCalls, Scope: []state.ScopePart{{Kind: state.ScopePrincipal}},
		Window: state.Window{Within: time.Hour, Resolution: 10 * time.Minute}}
	set := mustSet(t, d)
	ctx := context.Background()
	ev := &rulestate.Event{Kind: state.EventToolCall, Identity: alice, Tool: "search", Input: json.RawMessage(`{}`)}
	// Each admission adds a row; the live rows are those added less those
	// pruned.
	maxRows, rows := 0, 0
	for i := range 7 * 24 * 6 {
		vals, _, err := tr.Admit(ctx, ev, []*state.Decl{d}, set)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := vals["calls_per_hour"].(json.Number).Int64(); i >= 6 && (n < 6 || n > 7) {
			t.Fatalf("minute %d: %d calls in the last hour, want 6 or 7", i*10, n)
		}
		rows++
		if i%6 == 5 {
			n, err := tr.Prune(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rows -= n
		}
		maxRows = max(maxRows, rows)
		c.now = c.now.Add(10 * time.Minute)
	}
	// An hour and a resolution of rows live, plus an hour's before pruning.
	if maxRows > 14 {
		t.Fatalf("up to %d rows over the week, want at most 14", maxRows)
	}
}

// downStore is a state store that is unreachable.
type downStore struct{}

var errDown = errors.New("connection refused")

func (downStore) AdmitState(context.Context, *store.StateAdmission) ([]store.StateReading, error) {
	return nil, errDown
}
func (downStore) SettleState(context.Context, *store.StateSettlement) error { return errDown }
func (downStore) PruneState(context.Context, time.Time, int) (int, error)   { return 0, errDown }

// TestStoreOutageFailsClosed: when the state a call's rules read cannot
// be read, the call is refused with an error (the engine makes it a tool
// error the model sees), never decided on a guessed value.
func TestStoreOutageFailsClosed(t *testing.T) {
	rev, errs := ruleset.Load("testdata/bench", ruleset.Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	h := rulestate.New(downStore{}, rulestate.Options{}).Hooks(rev, rev.Hooks(nil, ruleset.FailOpen))
	tc := &engine.ToolCallContext{Identity: alice, Type: "tool-call", ToolCallID: "c", ToolName: "search", Input: json.RawMessage(`{}`)}
	if d, err := h.BeforeToolCall(context.Background(), tc); !errors.Is(err, errDown) {
		t.Fatalf("decision %+v, error %v; want the store's error even with the rules failing open", d, err)
	}
}

// TestApprovedCallCountsAsExecuted: a call held for approval does not
// count as executed; decided again once approved, and run, it does.
func TestApprovedCallCountsAsExecuted(t *testing.T) {
	rev, errs := ruleset.Load("testdata/approval", ruleset.Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	tr := rulestate.New(openSQLite(t), rulestate.Options{})
	ctx := context.Background()
	deletes := func() int64 {
		v, err := tr.Read(ctx, &rulestate.Event{Kind: state.EventToolCall, Identity: alice}, rev.StateReads(policy.HookBeforeToolCall))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := v["deletes"].(json.Number).Int64()
		return n
	}
	tc := &engine.ToolCallContext{Identity: alice, Type: "tool-call", ToolCallID: "c1", ToolName: "delete", Input: json.RawMessage(`{"path": "/tmp/x"}`)}
	held := tr.Hooks(rev, rev.Hooks(nil, ruleset.FailClosed))
	if d, err := held.BeforeToolCall(ctx, tc); err != nil || d == nil || d.Action != engine.ActionApproval {
		t.Fatalf("decision %+v, %v; want approval", d, err)
	}
	held.AfterToolCall(ctx, &engine.ToolCallResultContext{Identity: alice, ToolCallID: "c1", ToolName: "delete", Decision: engine.ActionApproval})
	if n := deletes(); n != 0 {
		t.Fatalf("a held call counts as %d executed deletes", n)
	}
	// The approval's turn: the engine decides the call again, then runs it.
	approved := tr.Hooks(rev, rev.Hooks(nil, ruleset.FailClosed))
	if _, err := approved.BeforeToolCall(ctx, tc); err != nil {
		t.Fatal(err)
	}
	approved.AfterToolCall(ctx, &engine.ToolCallResultContext{Identity: alice, ToolCallID: "c1", ToolName: "delete", Executed: true, Success: true, Decision: engine.DecisionAllow})
	if n := deletes(); n != 1 {
		t.Fatalf("the approved call that ran counts as %d executed deletes, want 1", n)
	}
}

// TestCallLackingScopeFieldIsInNoScope: calls whose input lacks the field
// a declaration is scoped by (absent or null) share no bucket: a
// verify_payee without a payee verifies no wire_transfer without one, and
// such calls are not counted, while calls with the field are.
func TestCallLackingScopeFieldIsInNoScope(t *testing.T) {
	call := admitter(t, payeeDecls("payee_verified", "to.address")...)
	for _, in := range []string{`{}`, `{"payee": null}`} {
		call("verify_payee", in)
	}
	for _, in := range []string{`{}`, `{"payee": null}`} {
		if v := call("wire_transfer", in); v["payee_verified"].(map[string]any)["happened"] != false {
			t.Errorf("wire_transfer %s reads %v after verify_payee calls without a payee", in, v["payee_verified"])
		}
	}
	call("verify_payee", `{"payee": "bob"}`)
	if v := call("wire_transfer", `{"payee": "bob"}`); v["payee_verified"].(map[string]any)["happened"] != true {
		t.Errorf("wire_transfer to bob reads %v after verify_payee of bob", v["payee_verified"])
	}
	for range 3 {
		call("send", `{"to": {}}`)
		call("send", `{"to": {"address": "a@x"}}`)
	}
	if v := call("send", `{}`); v["sends"] != json.Number("0") {
		t.Errorf("a send without to.address reads sends = %v, want 0 (such calls are not counted)", v["sends"])
	}
	if v := call("send", `{"to": {"address": "a@x"}}`); v["sends"] != json.Number("3") {
		t.Errorf("a send to a@x reads sends = %v, want 3", v["sends"])
	}
}

// TestScopeNumbersExact: a number in a scope field is its exact value: two
// account numbers beyond float64's 2^53 are two scopes (a verify_payee of
// one verified the other), and one value however spelt (1, 1.0, 1e0) is
// one scope, so a limit per account cannot be split by respelling it.
func TestScopeNumbersExact(t *testing.T) {
	call := admitter(t, payeeDecls("verified", "account")...)
	call("verify_payee", `{"payee": 9007199254740992}`)
	if v := call("wire_transfer", `{"payee": 9007199254740993}`); v["verified"].(map[string]any)["happened"] != false {
		t.Errorf("payee 9007199254740993 reads %v after verify_payee of 9007199254740992", v["verified"])
	}
	if v := call("wire_transfer", `{"payee": 9007199254740992.0}`); v["verified"].(map[string]any)["happened"] != true {
		t.Errorf("payee 9007199254740992.0 reads %v after verify_payee of 9007199254740992", v["verified"])
	}
	for _, account := range []string{`1`, `1.0`, `1e0`, `10e-1`, `0.1e1`} {
		call("send", `{"account": `+account+`}`)
	}
	if v := call("send", `{"account": 1.00}`); v["sends"] != json.Number("5") {
		t.Errorf("account 1.00 reads sends = %v after five sends to 1 spelt five ways, want 5", v["sends"])
	}
	if v := call("send", `{"account": 1e999999999}`); v["sends"] != json.Number("0") {
		t.Errorf("account 1e999999999 reads sends = %v, want 0", v["sends"])
	}
}
