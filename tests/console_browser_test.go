package tests

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The console's keys (testdata/console/turngate.yaml).
const (
	consoleAdmin  = "acme-admin-5d0c2f8e7b1a4c69a3e2d7f0b9c8e1a4"
	consoleOlga   = "acme-olga-9f3b7e2a6c1d4e58b0a7c3d2e9f1b6a5"
	consoleAlice  = "acme-alice-2e7d9c1b5a3f4e60b8d2c7a1f9e3b5d4"
	consoleGlobex = "globex-admin-7a1e3c5b9d2f4a68c0e4b2d6f8a1c3e5"
	// consoleRoot is a global admin: a tenant admin may not reload the
	// rules, which are every tenant's.
	consoleRoot = "ops-root-3c8e1a6f2b9d4e70a5c1f8b3d6e2a9c4"
)

// screenshotsEnv, set to 1, makes the browser tests write each view's
// screenshot into docs/console/ (go test ./tests -run TestConsoleInBrowser
// with TURNGATE_CONSOLE_SCREENSHOTS=1).
const screenshotsEnv = "TURNGATE_CONSOLE_SCREENSHOTS"

// browser is the one headless Chromium of the package's browser tests;
// each test gets a fresh browser context (its own cookies) in it.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// closeBrowser ends the browser, if one was started (TestMain).
func closeBrowser() {
	if browser.cancel != nil {
		browser.cancel()
	}
}

// newBrowserContext returns a new browser context: a private window with
// its own cookies, closed when the test ends. A missing Chromium fails the
// test: .ci/run installs it, so CI never skips these tests.
func newBrowserContext(t *testing.T) context.Context {
	t.Helper()
	browser.once.Do(func() {
		path, err := exec.LookPath("chromium")
		if err != nil {
			browser.err = fmt.Errorf("the console's browser tests need Chromium (apt-get install chromium; .ci/run installs it): %w", err)
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil {
			bcancel()
			acancel()
			browser.err = fmt.Errorf("starting %s: %w", path, err)
			return
		}
		browser.ctx, browser.cancel = bctx, func() { bcancel(); acancel() }
	})
	if browser.err != nil {
		t.Fatal(browser.err)
	}
	ctx, cancel := chromedp.NewContext(browser.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first action opens the tab, which lives as long as that call's
	// context: only later ones get the deadline.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a browser window: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, pollTimeout)
	t.Cleanup(cancelTimeout)
	return ctx
}

// run runs browser actions, failing the test with what.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one browser action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// signInAs opens the console of g and signs in with key.
func signInAs(t *testing.T, ctx context.Context, g *gateway, key string) {
	t.Helper()
	run(t, ctx, "signing in",
		chromedp.Navigate(g.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`#key`)),
		chromedp.SendKeys(chromedp.CSS(`#key`), key),
		chromedp.Click(chromedp.CSS(`#signin button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#principal`)))
}

// view opens the console's hash route and waits until the view has
// rendered.
func view(t *testing.T, ctx context.Context, g *gateway, route, name string) {
	t.Helper()
	run(t, ctx, "opening "+route,
		chromedp.Navigate(g.URL+"/console/#/"+route),
		chromedp.WaitVisible(chromedp.CSS(`main[data-ready="`+name+`"]`)))
}

// text returns the text of the element sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return value(t, ctx, "reading "+sel, chromedp.Text(chromedp.CSS(sel)))
}

// shots are the screenshots the browser tests took, by name.
var shots sync.Map

// screenshot takes the page's screenshot NAME (one of consoleScreenshots)
// and checks it is a page's PNG; with screenshotsEnv set it is written to
// docs/console/NAME.png, else nowhere (CI leaves the checkout as it is).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if !slices.Contains(slices.Collect(maps.Values(consoleScreenshots)), name) {
		t.Fatalf("screenshot %q is none of consoleScreenshots", name)
	}
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := checkScreenshot(png); err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
	shots.Store(name, true)
	if os.Getenv(screenshotsEnv) != "1" {
		return
	}
	dir := filepath.Join(repoRoot, "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkAllShot fails t unless the browser tests took every screenshot of
// consoleScreenshots: each view was shown. A run of some subtests only
// (-run with a /) takes some.
func checkAllShot(t *testing.T) {
	if t.Failed() || strings.Contains(flag.Lookup("test.run").Value.String(), "/") {
		return
	}
	for _, name := range consoleScreenshots {
		if _, ok := shots.Load(name); !ok {
			t.Errorf("no subtest took the screenshot %s", name)
		}
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestConsoleInBrowser drives the console in headless Chromium against the
// real gateway: sign-in, the overview, an approver approving a held tool
// call with the button (the turn resumes and the tool runs), the
// playground's live block beside a candidate's allow, and tenant isolation.
func TestConsoleInBrowser(t *testing.T) {
	g := startGateway(t, gatewayOptions{Config: "turngate.yaml", Dir: fixture(t, "console")})
	t.Cleanup(func() { checkAllShot(t) })

	t.Run("a wrong key is refused", func(t *testing.T) {
		ctx := newBrowserContext(t)
		run(t, ctx, "signing in with a wrong key",
			chromedp.Navigate(g.URL+"/console/"),
			chromedp.WaitVisible(chromedp.CSS(`#key`)),
			chromedp.SendKeys(chromedp.CSS(`#key`), "not-a-key"),
			chromedp.Click(chromedp.CSS(`#signin button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#signin-error .error`)))
		if got := text(t, ctx, `#signin-error`); !strings.Contains(got, "invalid API key") {
			t.Errorf("sign-in error %q", got)
		}
		screenshot(t, ctx, "sign-in")
	})

	t.Run("overview", func(t *testing.T) {
		// Two turns of acme's alice count in acme's quota usage.
		for i := range 2 {
			g.as(consoleAlice).chat("files", userChat(fmt.Sprintf("console-q%d-%d", i, time.Now().UnixNano()), "u1", "delete /tmp/a", nil))
		}
		ctx := newBrowserContext(t)
		signInAs(t, ctx, g, consoleAdmin)
		view(t, ctx, g, "overview", "overview")
		var st struct {
			Revision string `json:"revision"`
		}
		g.as(consoleAdmin).json("GET", "/v1/admin/rules", nil, 200, &st)
		if got := text(t, ctx, `#revision-id`); got != st.Revision {
			t.Errorf("the overview shows revision %q, the API %q", got, st.Revision)
		}
		if got := text(t, ctx, `#files`); !strings.Contains(got, "tools.rego") {
			t.Errorf("rule files %q", got)
		}
		if got := text(t, ctx, `#principal`); !strings.Contains(got, "sam · tenant acme") {
			t.Errorf("principal %q", got)
		}
		if got := text(t, ctx, `#tests-summary`); !strings.Contains(got, "1 passed, 0 failed") {
			t.Errorf("rule tests %q, want tools_test.rego's one test passed", got)
		}
		// tools_test.rego reaches the block rule, not the approval: the
		// approval's lines are listed as no test's.
		if got := text(t, ctx, `#coverage`); !strings.Contains(got, "Rego: ") || !strings.Contains(got, "tools.rego") {
			t.Errorf("coverage %q, want the Rego line coverage with tools.rego's untested lines", got)
		}
		// The quotas' usage: acme's two turns of its daily 1000, and none
		// of globex's quota.
		if got := text(t, ctx, `#limits tr[data-quota="tenant-turns"] li[data-key="acme"] .used`); got != "2 / 1000 turns" {
			t.Errorf("acme's tenant-turns usage shows %q, want 2 / 1000 turns; quotas %q", got, text(t, ctx, `#limits`))
		}
		if got := text(t, ctx, `#limits`); strings.Contains(got, "globex") {
			t.Errorf("acme's admin sees globex's quota: %q", got)
		}
		// SQLite serves one process: the Overview says so, and a tenant
		// admin is not shown the host's rules directory.
		if got := text(t, ctx, `#replicas`); !strings.Contains(got, "Single replica") {
			t.Errorf("replicas %q, want the single replica of a SQLite store", got)
		}
		if n := value(t, ctx, "looking for the rules directory", chromedp.Evaluate[int](`document.querySelectorAll('#rules-dir').length`)); n != 0 {
			t.Errorf("a tenant admin's Overview shows the rules directory %q", text(t, ctx, `#rules-dir`))
		}
		if got := text(t, ctx, `#revision`); strings.Contains(got, "Rules directory") {
			t.Errorf("a tenant admin's Overview has a rules-directory row: %q", got)
		}
		// The shadow disagreements are the tenant's, from the store.
		if got := text(t, ctx, `#shadow-disagreements`); !strings.Contains(got, "Disagreements (tenant acme, every replica, last 24h)") {
			t.Errorf("acme's admin's shadow disagreements read %q, want acme's of the last 24h", got)
		}
		screenshot(t, ctx, "overview")

		// A global admin sees the rules directory, as the API shows it.
		var root struct {
			Dir string `json:"dir"`
		}
		g.as(consoleRoot).json("GET", "/v1/admin/rules", nil, 200, &root)
		rootCtx := newBrowserContext(t)
		signInAs(t, rootCtx, g, consoleRoot)
		view(t, rootCtx, g, "overview", "overview")
		if got := text(t, rootCtx, `#rules-dir`); root.Dir == "" || got != root.Dir {
			t.Errorf("a global admin's Overview shows the rules directory %q, the API %q", got, root.Dir)
		}
		if got := text(t, rootCtx, `#shadow-disagreements`); !strings.Contains(got, "Disagreements (every tenant, every replica, last 24h)") {
			t.Errorf("a global admin's shadow disagreements read %q, want every tenant's", got)
		}

		// A rejected reload shows in the history at its file:line; the
		// revision keeps serving.
		bad := filepath.Join(g.opts.Dir, "rules", "zz_bad.rego")
		if err := os.WriteFile(bad, []byte("package turngate.tool_call\nblock contains if {\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		g.as(consoleRoot).json("POST", "/v1/admin/rules/reload", nil, 422, nil)
		run(t, ctx, "reloading the overview",
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready="overview"]`)))
		if got := text(t, ctx, `#reloads`); !strings.Contains(got, "rejected") || !strings.Contains(got, "zz_bad.rego:2") {
			t.Errorf("reload history %q: want the rejected reload at zz_bad.rego:2", got)
		}
		if got := text(t, ctx, `#revision-id`); got != st.Revision {
			t.Errorf("after a rejected reload the overview shows revision %q, want %q still", got, st.Revision)
		}
		if err := os.Remove(bad); err != nil {
			t.Fatal(err)
		}
		g.as(consoleRoot).json("POST", "/v1/admin/rules/reload", nil, 200, nil)
	})

	t.Run("an approver approves with the button and the tool runs", func(t *testing.T) {
		alice := g.as(consoleAlice)
		session := fmt.Sprintf("console-%d", time.Now().UnixNano())
		s := alice.chat("files", userChat(session, "u1", "delete /prod/db", nil))
		if !strings.Contains(s.String(), "tool-approval-request") {
			t.Fatalf("no approval asked:\n%s", s)
		}
		ctx := newBrowserContext(t)
		signInAs(t, ctx, g, consoleOlga)
		view(t, ctx, g, "approvals", "approvals")
		navLinks := value(t, ctx, "counting views", chromedp.Evaluate[int](`document.querySelectorAll('#nav a').length`))
		if navLinks != 1 {
			t.Errorf("an approver sees %d views, want Approvals only", navLinks)
		}
		card := `#pending article.approval`
		if got := text(t, ctx, card); !strings.Contains(got, "deletes a production file") || !strings.Contains(got, "/prod/db") {
			t.Fatalf("pending approval card %q", got)
		}
		screenshot(t, ctx, "approvals")
		run(t, ctx, "approving",
			chromedp.SendKeys(chromedp.CSS(card+` textarea.reason`), "checked with the DBA"),
			chromedp.Click(chromedp.CSS(card+` button.approve`)),
			chromedp.WaitVisible(chromedp.CSS(`#no-pending`)))
		if got := text(t, ctx, `#history`); !strings.Contains(got, "approved") || !strings.Contains(got, "olga") || !strings.Contains(got, "checked with the DBA") {
			t.Errorf("history %q", got)
		}
		poll(t, "the approved delete to run", func() error {
			var h struct {
				Messages []uiMessage `json:"messages"`
			}
			alice.json("GET", "/v1/agents/files/sessions/"+session+"/messages", nil, 200, &h)
			for _, m := range h.Messages {
				for _, p := range m.Parts {
					if p.Type == "tool-delete" && p.State == "output-available" && strings.Contains(string(p.Output), "/prod/db") {
						return nil
					}
				}
			}
			data, _ := json.Marshal(h.Messages)
			return fmt.Errorf("transcript %s", data)
		})
	})

	t.Run("the playground shows the live block beside a candidate's allow", func(t *testing.T) {
		ctx := newBrowserContext(t)
		signInAs(t, ctx, g, consoleAdmin)
		view(t, ctx, g, "playground", "playground")
		input := `{"type":"tool-call","toolCallId":"c1","toolName":"delete","input":{"path":"/etc/passwd"},` +
			`"tool":{"name":"delete","kind":"builtin"},"agent":"files","sessionId":"s1","principal":{"tenant":"acme","subject":"alice","roles":[]}}`
		run(t, ctx, "evaluating",
			chromedp.SetValue(chromedp.CSS(`#input`), input),
			chromedp.Click(chromedp.CSS(`#evaluate`)),
			chromedp.WaitVisible(chromedp.CSS(`#results[data-done="true"]`)))
		outcome := value(t, ctx, "reading the outcome", chromedp.AttributeValue(chromedp.CSS(`#live`), "data-outcome")).Value
		if got := text(t, ctx, `#live`); outcome != "matched" || !strings.Contains(got, `"action": "block"`) {
			t.Errorf("live outcome %q, want a matched block; results %q", outcome, got)
		}
		if got := text(t, ctx, `#live`); !strings.Contains(got, "no deletes under /etc") {
			t.Errorf("live result %q lacks the block reason", got)
		}
		if got := text(t, ctx, `#live .fired`); !strings.Contains(got, "(tools.rego:5)") {
			t.Errorf("live rules fired %q, want the block rule at tools.rego:5", got)
		}
		// Why not: the approval rule, with the expression that failed.
		if got := text(t, ctx, `#live .whynot`); !strings.Contains(got, "tools.rego:10") || !strings.Contains(got, "tools.rego:12") ||
			!strings.Contains(got, `startswith(input.tool.input.path, "/prod/")`) {
			t.Errorf("why not %q, want the approval rule (tools.rego:10) failing at tools.rego:12", got)
		}
		// A candidate without the block rule allows the same call, side
		// by side with the live block.
		run(t, ctx, "evaluating a candidate",
			chromedp.Click(chromedp.CSS(`#candidate button.add`)),
			chromedp.SetValue(chromedp.CSS(`#candidate .fname`), "tools.rego"),
			chromedp.SetValue(chromedp.CSS(`#candidate .ftext`), "package turngate.tool_call\n"),
			chromedp.Click(chromedp.CSS(`#evaluate`)),
			chromedp.WaitVisible(chromedp.CSS(`#results[data-done="true"]`)))
		live := value(t, ctx, "reading the live outcome", chromedp.AttributeValue(chromedp.CSS(`#live`), "data-outcome")).Value
		cand := value(t, ctx, "reading the candidate's outcome", chromedp.AttributeValue(chromedp.CSS(`#candidate-result`), "data-outcome")).Value
		if live != "matched" || cand != "no_match" {
			t.Errorf("live %q, candidate %q: want the live block beside the candidate's allow; results %q", live, cand, text(t, ctx, `#results`))
		}
		screenshot(t, ctx, "playground")
		// A broken candidate is refused with its position.
		run(t, ctx, "evaluating a broken candidate",
			chromedp.SetValue(chromedp.CSS(`#candidate .ftext`), "package turngate.tool_call\n\nblock contains x if {\n"),
			chromedp.Click(chromedp.CSS(`#evaluate`)),
			chromedp.WaitVisible(chromedp.CSS(`#results[data-done="true"]`)))
		if got := text(t, ctx, `#results`); !strings.Contains(got, "rules_invalid") || !strings.Contains(got, "tools.rego:") {
			t.Errorf("broken candidate: %q, want rules_invalid at tools.rego:line", got)
		}
		// onChatError's template against a candidate with a rule for it:
		// the live revision has none, the candidate's fires at its line,
		// and its other rule says why it did not.
		value(t, ctx, "choosing onChatError's template", chromedp.Evaluate[bool](`(() => {
			const hook = document.querySelector('#hook');
			hook.value = 'onChatError';
			return hook.dispatchEvent(new Event('change'));
		})()`))
		if got := value(t, ctx, "reading the input", chromedp.Value(chromedp.CSS(`#input`))); !strings.Contains(got, `"rate_limit"`) {
			t.Errorf("onChatError's template %q, want an error of class rate_limit", got)
		}
		run(t, ctx, "evaluating the onChatError template",
			chromedp.SetValue(chromedp.CSS(`#candidate .fname`), "errors.yaml"),
			chromedp.SetValue(chromedp.CSS(`#candidate .ftext`), "onChatError:\n  - name: busy\n    when: error.class == \"rate_limit\"\n    set:\n"+
				"      message: '\"Busy; try again soon.\"'\n  - name: down\n    when: error.class == \"fatal\"\n    set:\n      message: '\"Down.\"'\n"),
			chromedp.Click(chromedp.CSS(`#evaluate`)),
			chromedp.WaitVisible(chromedp.CSS(`#results[data-done="true"]`)))
		live = value(t, ctx, "reading the live outcome", chromedp.AttributeValue(chromedp.CSS(`#live`), "data-outcome")).Value
		cand = value(t, ctx, "reading the candidate's outcome", chromedp.AttributeValue(chromedp.CSS(`#candidate-result`), "data-outcome")).Value
		if live != "not_evaluated" || cand != "matched" {
			t.Errorf("onChatError: live %q, candidate %q, want not_evaluated beside matched; results %q", live, cand, text(t, ctx, `#results`))
		}
		if got := text(t, ctx, `#candidate-result`); !strings.Contains(got, "errors.yaml#busy (errors.yaml:2)") || !strings.Contains(got, "Busy; try again soon.") ||
			!strings.Contains(text(t, ctx, `#candidate-result .whynot`), "errors.yaml#down") {
			t.Errorf("onChatError candidate %q, want busy fired at errors.yaml:2, its message, and why down did not fire", got)
		}
	})

	t.Run("another tenant's admin sees none of acme's approvals", func(t *testing.T) {
		alice := g.as(consoleAlice)
		session := fmt.Sprintf("console-t-%d", time.Now().UnixNano())
		alice.chat("files", userChat(session, "u1", "delete /prod/logs", nil))
		ctx := newBrowserContext(t)
		// gus has the ops role the approval names: only its tenant keeps
		// it from him.
		type approval struct {
			SessionID string `json:"sessionId"`
		}
		var pending struct {
			Approvals []approval `json:"approvals"`
		}
		listed := func() bool {
			return slices.ContainsFunc(pending.Approvals, func(a approval) bool { return a.SessionID == session })
		}
		if g.as(consoleOlga).json("GET", "/v1/approvals", nil, 200, &pending); !listed() {
			t.Fatalf("acme's ops approver olga does not see the approval of %s: %+v", session, pending)
		}
		signInAs(t, ctx, g, consoleGlobex)
		view(t, ctx, g, "approvals", "approvals")
		if got := text(t, ctx, `main`); strings.Contains(got, "/prod/logs") || strings.Contains(got, session) {
			t.Errorf("globex's console shows acme's approval: %q", got)
		}
		if g.as(consoleGlobex).json("GET", "/v1/approvals?state=all", nil, 200, &pending); listed() {
			t.Errorf("globex's ops admin lists acme's approval: %+v", pending)
		}
		if got := text(t, ctx, `#principal`); !strings.Contains(got, "tenant globex") {
			t.Errorf("principal %q", got)
		}
	})

	t.Run("a blocked call is found by tool and action and its record shows the rule", func(t *testing.T) {
		session := fmt.Sprintf("console-b-%d", time.Now().UnixNano())
		g.as(consoleAlice).chat("files", userChat(session, "u1", "delete /etc/passwd", nil))
		var id string
		poll(t, "the blocked call's decision to be stored", func() error {
			var list struct {
				Decisions []struct {
					ID string `json:"id"`
				} `json:"decisions"`
			}
			g.as(consoleAdmin).json("GET", "/v1/admin/decisions?session="+session+"&tool=delete&action=block&hook=beforeToolCall", nil, 200, &list)
			if len(list.Decisions) != 1 {
				return fmt.Errorf("%d decisions", len(list.Decisions))
			}
			id = list.Decisions[0].ID
			return nil
		})
		ctx := newBrowserContext(t)
		signInAs(t, ctx, g, consoleAdmin)
		view(t, ctx, g, "decisions?tool=delete&action=block&hook=beforeToolCall&session="+session, "decisions")
		if got := text(t, ctx, `#list`); !strings.Contains(got, "no deletes under /etc") {
			t.Errorf("the list %q lacks the rule", got)
		}
		screenshot(t, ctx, "decisions")
		run(t, ctx, "opening the record",
			chromedp.Click(chromedp.CSS(`tr.decision a.open`)),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready="decision"]`)))
		if got := text(t, ctx, `#summary`); !strings.Contains(got, "no deletes under /etc") || !strings.Contains(got, id) && !strings.Contains(text(t, ctx, "h1"), id) {
			t.Errorf("the record %q lacks the rule", got)
		}
		// The rule fired with where it is defined: rules/tools.rego's block.
		if got := text(t, ctx, `#fired`); !strings.Contains(got, `data.turngate.tool_call.block["no deletes under /etc"] (tools.rego:5)`) {
			t.Errorf("rules fired %q, want the block rule at tools.rego:5", got)
		}
		screenshot(t, ctx, "decision")
		// Open in playground: the recorded input, evaluated again on the
		// live revision, is the same block.
		run(t, ctx, "opening the decision in the playground",
			chromedp.Click(chromedp.CSS(`#open-playground`)),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready="playground"]`)),
			chromedp.Click(chromedp.CSS(`#evaluate`)),
			chromedp.WaitVisible(chromedp.CSS(`#results[data-done="true"]`)))
		if got := value(t, ctx, "reading the outcome", chromedp.AttributeValue(chromedp.CSS(`#live`), "data-outcome")).Value; got != "matched" ||
			!strings.Contains(text(t, ctx, `#live`), "no deletes under /etc") {
			t.Errorf("the blocked decision in the playground: %q, want matched with the block; results %q", got, text(t, ctx, `#results`))
		}
		if got := text(t, ctx, `#source`); !strings.Contains(got, id) {
			t.Errorf("the playground's input is from %q, want decision %s", got, id)
		}
		view(t, ctx, g, "decision/"+id, "decision")
		run(t, ctx, "opening the turn",
			chromedp.Click(chromedp.CSS(`#turn-link`)),
			chromedp.WaitVisible(chromedp.CSS(`main[data-ready="turn"]`)))
		hooks := value(t, ctx, "listing the hooks", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#timeline li.hook')].map(li => li.dataset.hook)`))
		if i := slices.Index(hooks, "beforeToolCall"); i < 0 || slices.Index(hooks, "beforeTurn") > i {
			t.Errorf("the timeline's hooks %q: want beforeToolCall, after beforeTurn when recorded", hooks)
		}

		other := newBrowserContext(t)
		signInAs(t, other, g, consoleGlobex)
		view(t, other, g, "decision/"+id, "decision")
		if got := text(t, other, `main`); !strings.Contains(got, "not_found") || strings.Contains(got, "/etc/passwd") {
			t.Errorf("globex's admin sees acme's decision: %q", got)
		}
	})

	t.Run("the timeline draws a turn's hooks in the reference's execution order", func(t *testing.T) {
		session := fmt.Sprintf("console-tl-%d", time.Now().UnixNano())
		g.as(consoleAlice).chat("files", userChat(session, "u1", "tidy up", nil))
		var turn string
		poll(t, "the turn's end in the store", func() error {
			var list struct {
				Decisions []struct {
					Turn string `json:"turn"`
				} `json:"decisions"`
			}
			g.as(consoleAdmin).json("GET", "/v1/admin/decisions?session="+session+"&hook=onChatResponse", nil, 200, &list)
			if len(list.Decisions) != 1 {
				return fmt.Errorf("%d onChatResponse records", len(list.Decisions))
			}
			turn = list.Decisions[0].Turn
			return nil
		})
		ctx := newBrowserContext(t)
		signInAs(t, ctx, g, consoleAdmin)
		view(t, ctx, g, "turn/"+turn, "turn")
		// Each hook as hook@step, in the order drawn: beforeTurn, each
		// step's beforeStep, its tool call (beforeToolCall, toolResult,
		// afterToolCall) and onStepFinish, then onChatResponse.
		want := []string{"beforeTurn",
			"beforeStep@0", "beforeToolCall@0", "toolResult@0", "afterToolCall@0", "onStepFinish@0",
			"beforeStep@1", "beforeToolCall@1", "toolResult@1", "afterToolCall@1", "onStepFinish@1",
			"beforeStep@2", "onStepFinish@2", "onChatResponse"}
		drawn := value(t, ctx, "listing the hooks", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#timeline li.hook')].map(li => {
			const step = li.closest('li.step');
			return li.dataset.hook + (step ? '@' + step.dataset.step : '');
		})`))
		if !slices.Equal(drawn, want) {
			t.Errorf("the timeline draws\n%q\nwant\n%q", drawn, want)
		}
		calls := value(t, ctx, "reading the tool calls", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#timeline li.call')].map(li => li.textContent)`))
		if len(calls) != 2 {
			t.Fatalf("tool calls drawn: %q, want 2", calls)
		}
		for _, c := range calls {
			if !strings.Contains(c, "delete") || !strings.Contains(c, "decision allow") || !strings.Contains(c, "tool executes") || !strings.Contains(c, "succeeded") {
				t.Errorf("tool call %q: want the delete, its decision allow, its execution and result", c)
			}
		}
		// Each hook's overrides: rules/turn.yaml's on the turn and on
		// every step.
		if got := text(t, ctx, `#timeline li.hook.beforeTurn`); !strings.Contains(got, "maxSteps = 4") || !strings.Contains(got, "turn.yaml#cap-steps") {
			t.Errorf("beforeTurn %q, want its override maxSteps = 4 by turn.yaml#cap-steps", got)
		}
		steps := value(t, ctx, "reading the steps' overrides", chromedp.Evaluate[[]string](`[...document.querySelectorAll('#timeline li.hook.beforeStep')].map(li => li.textContent)`))
		for i, s := range steps {
			if !strings.Contains(s, `activeTools = ["delete"]`) {
				t.Errorf("step %d's beforeStep %q, want its override activeTools = [\"delete\"]", i, s)
			}
		}
		if got := text(t, ctx, `#stop`); !strings.Contains(got, "stop") || !strings.Contains(got, "completed, 3 steps") {
			t.Errorf("stop reason %q, want the finish reason stop (completed, 3 steps)", got)
		}
		// The same records handed over newest first, with one time: the
		// order is the steps' and the hooks', not the records' times.
		shuffled := value(t, ctx, "ordering shuffled records", chromedp.Evaluate[[]string](`(async () => {
			const m = await import('/console/app/timeline.js');
			const page = await fetch('/v1/admin/decisions?order=asc&limit=500&turn=' + encodeURIComponent(`+jsString(turn)+`)).then(r => r.json());
			const ds = page.decisions.reverse().map(d => ({ ...d, time: page.decisions[0].time }));
			return m.order(ds).map(d => d.hook + (d.hook === 'beforeTurn' || d.hook === 'onChatResponse' ? '' : '@' + d.step));
		})()`, chromedp.EvalAwaitPromise))
		if !slices.Equal(shuffled, want) {
			t.Errorf("records out of order and with tied times are ordered\n%q\nwant\n%q", shuffled, want)
		}
		screenshot(t, ctx, "timeline")
	})

	t.Run("replay shows the counts turngate replay reports for the same log", func(t *testing.T) {
		session := fmt.Sprintf("console-r-%d", time.Now().UnixNano())
		g.as(consoleAlice).chat("files", userChat(session, "u1", "delete /etc/hosts", nil))
		candidateDir := filepath.Join(repoRoot, "tests", "testdata", "console", "candidate")
		candidate, err := os.ReadFile(filepath.Join(candidateDir, "tools.rego"))
		if err != nil {
			t.Fatal(err)
		}
		// The whole range: every record since the gateway started.
		since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
		body := map[string]any{"candidate": map[string]any{"files": map[string]string{"tools.rego": string(candidate)}}, "since": since}
		// The store copies each line the audit log writes, in order: once
		// it holds as many decision records as the log (no turn of this
		// test runs now; the held ones wait for an approver), the two
		// replays read the same records.
		auditLog := filepath.Join(g.opts.Dir, "data", "audit.log")
		var api replayCounts
		poll(t, "the store to hold the audit log's decisions", func() error {
			data, err := os.ReadFile(auditLog)
			if err != nil {
				return err
			}
			inLog := strings.Count(string(data), `"kind":"decision"`)
			api = replayCounts{}
			g.as(consoleAdmin).json("POST", "/v1/admin/replay", body, 200, &api)
			if api.Decisions != inLog {
				return fmt.Errorf("the store has %d decisions, the audit log %d", api.Decisions, inLog)
			}
			return nil
		})
		out, stderr, code := turngateCmd(t, g.opts.Dir, "replay", "--format", "json", "--rules", candidateDir, auditLog)
		if code != 0 || stderr != "" {
			t.Fatalf("turngate replay: exit %d, stderr %s\n%s", code, stderr, out)
		}
		var cli replayCounts
		if err := json.Unmarshal([]byte(out), &cli); err != nil {
			t.Fatalf("turngate replay --format json: %v\n%s", err, out)
		}
		if cli.Changed == 0 || cli.Truncated {
			t.Fatalf("turngate replay: %+v, want changes of the whole log", cli)
		}
		ctx := newBrowserContext(t)
		signInAs(t, ctx, g, consoleAdmin)
		view(t, ctx, g, "replay", "replay")
		run(t, ctx, "replaying",
			chromedp.SetValue(chromedp.CSS(`#since`), since),
			chromedp.Click(chromedp.CSS(`#candidate button.add`)),
			chromedp.SetValue(chromedp.CSS(`#candidate .fname`), "tools.rego"),
			chromedp.SetValue(chromedp.CSS(`#candidate .ftext`), string(candidate)),
			chromedp.Click(chromedp.CSS(`#run`)),
			chromedp.WaitVisible(chromedp.CSS(`#results[data-done="true"]`)))
		page := pageReplayCounts(t, ctx)
		if !reflect.DeepEqual(page, cli.counts()) {
			t.Errorf("the console shows\n%v\nturngate replay reports\n%v\nreport %q", page, cli.counts(), text(t, ctx, `#results`))
		}
		if n := value(t, ctx, "looking for the truncation notice", chromedp.Evaluate[int](`document.querySelectorAll('#truncated').length`)); n != 0 {
			t.Errorf("a whole replay says it was truncated: %q", text(t, ctx, `#truncated`))
		}
		if links := value(t, ctx, "counting links", chromedp.Evaluate[int](`document.querySelectorAll('a.changed').length`)); links == 0 {
			t.Errorf("no link to a changed decision")
		}
		screenshot(t, ctx, "replay")
		// A limit below the range's records replays the first ones and
		// says so.
		run(t, ctx, "replaying 3 records",
			chromedp.SetValue(chromedp.CSS(`#limit`), "3"),
			chromedp.Click(chromedp.CSS(`#run`)),
			chromedp.WaitVisible(chromedp.CSS(`#truncated`)))
		if got := text(t, ctx, `#truncated`); !strings.Contains(got, "limit of 3 records") {
			t.Errorf("truncation notice %q", got)
		}
		if got := text(t, ctx, `[data-count="decisions"]`); got != "1" && got != "2" && got != "3" {
			t.Errorf("a replay of 3 records counts %s decisions, want the decisions among them", got)
		}
	})

	t.Run("sign-out ends the session", func(t *testing.T) {
		ctx := newBrowserContext(t)
		signInAs(t, ctx, g, consoleAdmin)
		view(t, ctx, g, "overview", "overview")
		run(t, ctx, "signing out",
			chromedp.Click(chromedp.CSS(`#signout`)),
			chromedp.WaitVisible(chromedp.CSS(`#key`)),
			chromedp.Navigate(g.URL+"/console/#/overview"),
			chromedp.WaitVisible(chromedp.CSS(`#key`)))
		status := value(t, ctx, "fetching the admin API after sign-out",
			chromedp.Evaluate[int](`fetch('/v1/admin/rules').then(r => r.status)`, chromedp.EvalAwaitPromise))
		if status != 401 {
			t.Errorf("after sign-out the admin API answers %d", status)
		}
	})
}

// TestConsoleInBrowserReplicas: two gateways on one PostgreSQL store,
// the second with one rule file more, and a replica that stopped reporting
// ten minutes ago: the first one's Overview lists all three, the second
// flagged as serving another revision (its full revision in the cell's
// title), the silent one as stale, itself as in step.
func TestConsoleInBrowserReplicas(t *testing.T) {
	dsn, schema, conn := pgSchema(t)
	env := []string{"TURNGATE_TEST_STORE_DSN=" + dsn}
	start := func(id string, extra map[string]string) *gateway {
		dir := fixture(t, "console")
		cfgPath := filepath.Join(dir, "turngate.yaml")
		data, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		const sqliteStore = "store:\n  path: data/turngate.db\n"
		if !strings.Contains(string(data), sqliteStore) {
			t.Fatalf("%s has no %q block to replace", cfgPath, sqliteStore)
		}
		cfg := strings.Replace(string(data), sqliteStore, "store:\n  driver: postgres\n  dsn: ${TURNGATE_TEST_STORE_DSN}\n\nreplica: {id: "+id+"}\n", 1)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, src := range extra {
			if err := os.WriteFile(filepath.Join(dir, "rules", name), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return startGateway(t, gatewayOptions{Config: "turngate.yaml", Dir: dir, Env: env})
	}
	a := start("replica-a", nil)
	b := start("replica-b", map[string]string{"drop.rego": "package turngate.tool_call\n\nblock contains \"no drops\" if input.tool.name == \"drop\"\n"})
	gone := time.Now().Add(-10 * time.Minute).UnixNano()
	if _, err := conn.Exec(context.Background(), `INSERT INTO `+schema+`.replica_revisions (replica, revision, files, reported_at) VALUES ($1, $2, $3, $4)`,
		"replica-gone", "sha256:00000000000000000000000000000000000000000000000000000000deadbeef", `[{"name":"old.rego","kind":"rego","size":1,"sha256":"00"}]`, gone); err != nil {
		t.Fatal(err)
	}
	type overview struct {
		Revision string `json:"revision"`
		Replicas []struct {
			Replica  string `json:"replica"`
			Revision string `json:"revision"`
		} `json:"replicas"`
	}
	var stB overview
	b.as(consoleAdmin).json("GET", "/v1/admin/rules", nil, 200, &stB)
	var stA overview
	poll(t, "replica-a listing the three replicas", func() error {
		a.as(consoleAdmin).json("GET", "/v1/admin/rules", nil, 200, &stA)
		if len(stA.Replicas) != 3 {
			return fmt.Errorf("replicas %+v", stA.Replicas)
		}
		return nil
	})
	if stA.Revision == stB.Revision {
		t.Fatalf("both replicas serve %s: the second one's extra rule file changed nothing", stA.Revision)
	}

	ctx := newBrowserContext(t)
	signInAs(t, ctx, a, consoleAdmin)
	view(t, ctx, a, "overview", "overview")
	if n := value(t, ctx, "looking for the single-replica note", chromedp.Evaluate[int](`document.querySelectorAll('#single-replica').length`)); n != 0 {
		t.Errorf("a shared store's Overview says %q", text(t, ctx, `#single-replica`))
	}
	for _, tc := range []struct {
		replica, revision string
		want, notWant     []string
	}{
		{"replica-a", stA.Revision, []string{"(this one)", "in step", "3 files", "tools.rego"}, []string{"stale", "differs"}},
		{"replica-b", stB.Revision, []string{"differs", "4 files", "drop.rego"}, []string{"stale", "in step", "this one"}},
		{"replica-gone", "sha256:00000000000000000000000000000000000000000000000000000000deadbeef", []string{"stale", "differs", "1 file", "old.rego", "10 min ago"}, []string{"in step"}},
	} {
		row := `#replicas tr[data-replica="` + tc.replica + `"]`
		got := text(t, ctx, row)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s's row %q lacks %q", tc.replica, got, w)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(got, w) {
				t.Errorf("%s's row %q says %q", tc.replica, got, w)
			}
		}
		title := value(t, ctx, "reading "+tc.replica+"'s revision", chromedp.Evaluate[string](`document.querySelector(`+jsString(row+` code.hash`)+`).title`))
		if title != tc.revision || !strings.Contains(got, tc.revision[:23]) {
			t.Errorf("%s's revision cell shows %q titled %q, want %s", tc.replica, got, title, tc.revision)
		}
	}
	if got := text(t, ctx, `#replicas-differ`); !strings.Contains(got, "2 of 3 replicas") {
		t.Errorf("the replicas' notice %q, want 2 of 3 serving another revision", got)
	}
}

// replayCounts are the counts of a replay report (`turngate replay
// --format json`, POST /v1/admin/replay).
type replayCounts struct {
	Decisions       int  `json:"decisions"`
	Replayed        int  `json:"replayed"`
	NotReplayable   int  `json:"notReplayable"`
	UnrecordedState int  `json:"unrecordedState"`
	Unchanged       int  `json:"unchanged"`
	Changed         int  `json:"changed"`
	Truncated       bool `json:"truncated"`
	Changes         []struct {
		Kind  string `json:"kind"`
		Count int    `json:"count"`
	} `json:"changes"`
}

// counts are the report's counts by name, each kind of change's as
// "kind:NAME", as pageReplayCounts reads them.
func (r replayCounts) counts() map[string]string {
	m := map[string]string{"decisions": fmt.Sprint(r.Decisions), "replayed": fmt.Sprint(r.Replayed), "notReplayable": fmt.Sprint(r.NotReplayable),
		"unrecordedState": fmt.Sprint(r.UnrecordedState), "unchanged": fmt.Sprint(r.Unchanged), "changed": fmt.Sprint(r.Changed)}
	for _, c := range r.Changes {
		m["kind:"+c.Kind] = fmt.Sprint(c.Count)
	}
	return m
}

// pageReplayCounts reads the counts the Replay page shows.
func pageReplayCounts(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	return value(t, ctx, "reading the replay's counts", chromedp.Evaluate[map[string]string](`Object.fromEntries([
		...[...document.querySelectorAll('[data-count]')].map(e => [e.dataset.count, e.textContent]),
		...[...document.querySelectorAll('[data-kind-count]')].map(e => ['kind:' + e.dataset.kindCount, e.textContent])])`))
}
