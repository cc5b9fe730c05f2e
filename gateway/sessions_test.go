package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/policy"
)

func TestSaveMessagesAndContinue(t *testing.T) {
	g := newTestGateway(t, "basic")
	var res turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{
		"messages": []any{map[string]any{"id": "m1", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "weather in Rome"}}}},
		"body":     map[string]any{"mode": "test"},
	}, http.StatusOK, &res)
	if res.Status != engine.StatusCompleted || res.FinishReason != engine.FinishStop || res.RequestID == "" {
		t.Errorf("saveMessages result %+v", res)
	}
	if res.Message.Role != engine.RoleAssistant || len(res.Message.Parts) == 0 {
		t.Errorf("saveMessages message %+v", res.Message)
	}
	msgs := g.history("demo", "s1")
	if len(msgs) != 2 || msgs[0].ID != "m1" || msgs[1].ID != res.Message.ID {
		t.Fatalf("history %+v", msgs)
	}

	// continueLastTurn continues the stored assistant message.
	var cont turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/continue", nil, http.StatusOK, &cont)
	if cont.Status != engine.StatusCompleted || cont.Message.ID != res.Message.ID {
		t.Errorf("continue result %+v, want the same message continued", cont)
	}
	if n := len(g.history("demo", "s1")); n != 2 {
		t.Errorf("continue added messages: %d", n)
	}

	// With a user message last, continue is skipped.
	g.doJSON("POST", "/v1/agents/demo/sessions/s2/messages", map[string]any{"text": "hello", "async": true}, http.StatusAccepted, nil)
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s3/messages", map[string]any{"text": "x", "async": true}, http.StatusAccepted, &sub)
	waitSubmission(t, g, "demo", "s3", sub.SubmissionID)
	if err := g.store.AppendMessage(context.Background(), "default", "s3", engine.UIMessage{ID: "late", Role: engine.RoleUser,
		Parts: []engine.UIPart{{Type: engine.PartText, Text: "unanswered"}}}); err != nil {
		t.Fatal(err)
	}
	var skipped turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s3/continue", map[string]any{}, http.StatusOK, &skipped)
	if skipped.Status != StatusSkipped {
		t.Errorf("continue after a user message: status %q, want skipped", skipped.Status)
	}
}

// waitSubmission polls a submission until it is finished and returns it.
func waitSubmission(t *testing.T, g *testGateway, agent, session, id string) submissionResponse {
	t.Helper()
	var sub submissionResponse
	waitFor(t, "submission "+id, func() bool {
		g.doJSON("GET", fmt.Sprintf("/v1/agents/%s/sessions/%s/submissions/%s", agent, session, id), nil, http.StatusOK, &sub)
		return sub.Status != "queued" && sub.Status != "running"
	})
	return sub
}

func TestSubmissionsIdempotencyAndOrder(t *testing.T) {
	g := newTestGateway(t, "basic")
	var first, again submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "one", "async": true},
		http.StatusAccepted, &first, "Idempotency-Key", "k1")
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "one again", "async": true},
		http.StatusOK, &again, "Idempotency-Key", "k1")
	if again.SubmissionID != first.SubmissionID || again.Accepted {
		t.Errorf("repeated idempotency key: %+v, want the first submission, not accepted", again)
	}
	ids := []string{first.SubmissionID}
	for _, text := range []string{"two", "three"} {
		var s submissionResponse
		g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": text, "async": true}, http.StatusAccepted, &s)
		ids = append(ids, s.SubmissionID)
	}
	for _, id := range ids {
		if s := waitSubmission(t, g, "demo", "s1", id); s.Status != engine.StatusCompleted {
			t.Errorf("submission %s ended %q", id, s.Status)
		}
	}
	msgs := g.history("demo", "s1")
	var users []string
	for i, m := range msgs {
		want := engine.RoleUser
		if i%2 == 1 {
			want = engine.RoleAssistant
		}
		if m.Role != want {
			t.Fatalf("message %d is %s, want %s: turns interleaved", i, m.Role, want)
		}
		if m.Role == engine.RoleUser {
			users = append(users, textOf(m))
		}
	}
	if fmt.Sprint(users) != "[one two three]" {
		t.Errorf("submissions ran in order %v", users)
	}
}

func TestSubmissionSurvivesRestart(t *testing.T) {
	cfg := testConfig(t, "basic")
	g := startGateway(t, cfg, Options{})
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/slow/sessions/s1/messages", map[string]any{"text": "tell me a long story", "async": true},
		http.StatusAccepted, &sub)
	// Stop at once: the turn (if a worker claimed it) is aborted and the
	// submission stays unfinished in the store.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.shutdown(ctx)

	g2 := startGateway(t, cfg, Options{})
	got := waitSubmission(t, g2, "slow", "s1", sub.SubmissionID)
	if got.Status != engine.StatusCompleted {
		t.Fatalf("submission after restart: %+v", got)
	}
	msgs := g2.history("slow", "s1")
	if len(msgs) != 2 || textOf(msgs[0]) != "tell me a long story" || msgs[1].Role != engine.RoleAssistant {
		t.Fatalf("history after restart: %+v", msgs)
	}
	if textOf(msgs[1]) == "" {
		t.Error("the restarted turn left no answer")
	}
}

// TestTenantIsolation checks every session endpoint as another tenant and
// as another agent: reads, cancel and reconnect answer 404 not_found (also
// while the owner's turn is running, which they must not disturb); writes
// to the same session id as another tenant make the caller's own session.
func TestTenantIsolation(t *testing.T) {
	g := newTestGateway(t, "basic", func(c *config.Config) {
		c.Auth.APIKeys = []config.APIKey{
			{Key: "key-a", Tenant: "a", Subject: "alice", Roles: []string{"admin"}},
			{Key: "key-b", Tenant: "b", Subject: "bob"},
		}
	})
	g.key = "key-a"
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "secret of a", "async": true}, http.StatusAccepted, &sub)
	waitSubmission(t, g, "demo", "s1", sub.SubmissionID)
	// a's slow turn keeps running on session "live" during the probes.
	live := g.do("POST", "/v1/agents/slow/chat", chatBody("live", "u1", "tell me a long story"))
	defer live.Body.Close()
	liveReader := bufio.NewReader(live.Body)
	readUntil(t, liveReader, `"text-delta"`)

	probes := func(agent, session string) []struct{ method, path string } {
		base := "/v1/agents/" + agent
		return []struct{ method, path string }{
			{"GET", base + "/sessions/" + session + "/messages"},
			{"POST", base + "/sessions/" + session + "/continue"},
			{"POST", base + "/sessions/" + session + "/cancel"},
			{"GET", base + "/sessions/" + session + "/submissions/" + sub.SubmissionID},
			{"GET", base + "/chat/" + session + "/stream"},
		}
	}
	var cases []struct{ who, key, method, path string }
	for _, p := range append(probes("demo", "s1"), probes("slow", "live")...) {
		cases = append(cases, struct{ who, key, method, path string }{"tenant b", "key-b", p.method, p.path})
	}
	for _, p := range append(probes("other", "s1"), probes("demo", "live")...) {
		cases = append(cases, struct{ who, key, method, path string }{"tenant a, other agent", "key-a", p.method, p.path})
	}
	// Writes to a session of another agent are refused the same way.
	cases = append(cases,
		struct{ who, key, method, path string }{"tenant a, other agent", "key-a", "POST", "/v1/agents/other/chat"},
		struct{ who, key, method, path string }{"tenant a, other agent", "key-a", "POST", "/v1/agents/other/sessions/s1/messages"},
	)
	for _, c := range cases {
		t.Run(c.who+" "+c.method+" "+c.path, func(t *testing.T) {
			g.key = c.key
			var body any
			switch {
			case strings.HasSuffix(c.path, "/chat"):
				body = chatBody("s1", "x1", "hi")
			case strings.HasSuffix(c.path, "/messages") && c.method == "POST":
				body = map[string]any{"text": "hi"}
			}
			var e map[string]string
			g.doJSON(c.method, c.path, body, http.StatusNotFound, &e)
			if e["code"] != CodeNotFound {
				t.Errorf("code %q, want %q", e["code"], CodeNotFound)
			}
		})
	}

	// a's live turn was neither cancelled nor joined by b.
	readUntil(t, liveReader, "[DONE]") // sent once the turn is recorded
	g.key = "key-a"
	recs, err := g.store.Turns(t.Context(), "a", "live")
	if err != nil || len(recs) != 1 || recs[0].Status != engine.StatusCompleted {
		t.Errorf("a's live turn records %+v, %v; want one completed", recs, err)
	}

	// Writing to "s1" as b makes b's own session; a's stays untouched, and
	// a's submission is not visible through b's session.
	g.key = "key-b"
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "b1", "hello from b")))
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "more from b"}, http.StatusOK, nil)
	for _, m := range g.history("demo", "s1") {
		if textOf(m) == "secret of a" {
			t.Fatal("tenant b sees tenant a's message")
		}
	}
	g.doJSON("GET", "/v1/agents/demo/sessions/s1/submissions/"+sub.SubmissionID, nil, http.StatusNotFound, nil)
	g.key = "key-a"
	aMsgs := g.history("demo", "s1")
	if len(aMsgs) != 2 || textOf(aMsgs[0]) != "secret of a" {
		t.Errorf("tenant a's session changed: %+v", aMsgs)
	}
}

func TestAuthAndAdmin(t *testing.T) {
	g := newTestGateway(t, "basic", func(c *config.Config) {
		c.Auth.APIKeys = []config.APIKey{
			{Key: "admin-key", Tenant: "a", Roles: []string{"admin", RoleGlobalAdmin}},
			{Key: "tenant-admin-key", Tenant: "a", Roles: []string{"admin"}},
			// sha256("user-key")
			{KeySHA256: "0845e3658edc1c91bfc9d172eeae3e60417056b1b7fe9909c00e05023adb7f1d", Tenant: "a"},
			{Key: "plain-key", Tenant: "a"},
		}
	})
	tests := []struct {
		name, key, method, path string
		want                    int
	}{
		{"no key", "", "GET", "/v1/admin/rules", http.StatusUnauthorized},
		{"wrong key", "nope", "GET", "/v1/admin/rules", http.StatusUnauthorized},
		{"not admin", "plain-key", "GET", "/v1/admin/rules", http.StatusForbidden},
		{"not admin reload", "plain-key", "POST", "/v1/admin/rules/reload", http.StatusForbidden},
		{"admin", "admin-key", "GET", "/v1/admin/rules", http.StatusOK},
		{"hashed key", "user-key", "GET", "/v1/agents/demo/sessions/x/messages", http.StatusNotFound},
		{"admin reload", "admin-key", "POST", "/v1/admin/rules/reload", http.StatusOK},
		{"tenant admin reload", "tenant-admin-key", "POST", "/v1/admin/rules/reload", http.StatusForbidden},
		{"no key on a session", "", "GET", "/v1/agents/demo/sessions/x/messages", http.StatusUnauthorized},
		{"health is open", "", "GET", "/healthz", http.StatusOK},
		{"readiness is open", "", "GET", "/readyz", http.StatusOK},
		{"metrics are open", "", "GET", "/metrics", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g.key = tc.key
			resp := g.do(tc.method, tc.path, nil)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
}

func TestAdminRules(t *testing.T) {
	g := newTestGateway(t, "basic")
	var status map[string]any
	g.doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &status)
	if rev, _ := status["revision"].(string); len(rev) < 10 {
		t.Errorf("rules status %v has no revision", status)
	}
	var res map[string]any
	g.doJSON("POST", "/v1/admin/rules/eval", map[string]any{
		"hook":  "beforeToolCall",
		"input": map[string]any{"type": "tool-call", "toolCallId": "c1", "toolName": "delete", "input": map[string]any{"path": "/"}, "tool": map[string]any{"name": "delete", "kind": "builtin"}},
	}, http.StatusOK, &res)
	if res["outcome"] != "matched" {
		t.Errorf("dry run of a delete: %v, want the block rule matched", res)
	}
	// What the dry run answered is itself an input: evaluated again, the
	// same decision on the same input.
	var again map[string]any
	g.doJSON("POST", "/v1/admin/rules/eval", map[string]any{"hook": "beforeToolCall", "input": res}, http.StatusOK, &again)
	if fmt.Sprint(again) != fmt.Sprint(res) {
		t.Errorf("the answer evaluated again = %v, want %v", again, res)
	}
	g.doJSON("POST", "/v1/admin/rules/eval", map[string]any{"hook": "nope", "input": map[string]any{}}, http.StatusBadRequest, nil)
}

// TestAdminRulesReload breaks and fixes a rule file: the rejected reload is
// a 422 with positioned diagnostics, the status shows them while the last
// good revision keeps serving, and the fixed file loads.
func TestAdminRulesReload(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "rules", "basic", "tools.rego"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "tools.rego")
	write := func(data string) {
		if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(string(src))
	g := newTestGateway(t, "basic", func(c *config.Config) { c.Rules.Dir = dir })
	type status struct {
		Revision  string           `json:"revision"`
		Files     []map[string]any `json:"files"`
		LoadedAt  time.Time        `json:"loadedAt"`
		LastError []policy.Error   `json:"lastError"`
	}
	var before status
	g.doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &before)
	if len(before.Files) != 1 || before.LoadedAt.IsZero() || len(before.LastError) != 0 {
		t.Fatalf("rules status %+v", before)
	}

	write(string(src) + "\nblock contains x if {\n")
	var rejected struct {
		Code   string         `json:"code"`
		Errors []policy.Error `json:"errors"`
	}
	g.doJSON("POST", "/v1/admin/rules/reload", nil, http.StatusUnprocessableEntity, &rejected)
	if rejected.Code != CodeRulesInvalid || len(rejected.Errors) == 0 || rejected.Errors[0].Location.Line == 0 ||
		!strings.HasSuffix(rejected.Errors[0].Location.File, "tools.rego") {
		t.Fatalf("rejected reload %+v, want positioned diagnostics", rejected)
	}
	var broken status
	g.doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &broken)
	if broken.Revision != before.Revision || len(broken.LastError) == 0 || broken.LastError[0].Location.Line == 0 {
		t.Errorf("status after the rejected reload %+v, want the old revision and the positioned error", broken)
	}
	chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "delete /etc/passwd")))
	if !strings.Contains(mustJSON(chunks), "delete is disabled") {
		t.Error("the last good revision stopped blocking deletes")
	}

	write(strings.Replace(string(src), "disabled on this gateway", "disabled here", 1))
	var reloaded map[string]any
	g.doJSON("POST", "/v1/admin/rules/reload", nil, http.StatusOK, &reloaded)
	var fixed status
	g.doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &fixed)
	if reloaded["changed"] != true || fixed.Revision == before.Revision || fixed.Revision != reloaded["revision"] || len(fixed.LastError) != 0 {
		t.Errorf("after the fix: reload %v, status %+v", reloaded, fixed)
	}
}
