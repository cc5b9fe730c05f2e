package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// gate serves the fixture's "slow" http tool: every call is announced on
// calls and then waits until the test opens the gate (or the caller goes
// away), so a test can catch a turn in the middle of a tool call without
// any timing assumption.
type gate struct {
	URL   string
	calls chan string
	open  chan struct{}
	once  sync.Once
}

// startGate serves a gate until the test ends.
func startGate(t *testing.T) *gate {
	t.Helper()
	g := &gate{calls: make(chan string, 16), open: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Job string `json:"job"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, "bad input", http.StatusBadRequest)
			return
		}
		select {
		case g.calls <- in.Job:
		default:
		}
		select {
		case <-g.open:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"job": in.Job, "status": "done"})
		case <-r.Context().Done():
		}
	}))
	g.URL = srv.URL
	t.Cleanup(func() {
		g.release()
		srv.Close()
	})
	return g
}

// release opens the gate: waiting and later calls answer at once.
func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// waitCall waits for the next call of the slow tool and returns its job.
func (g *gate) waitCall(t *testing.T) string {
	t.Helper()
	select {
	case job := <-g.calls:
		return job
	case <-time.After(pollTimeout):
		t.Fatalf("the slow tool was not called within %v", pollTimeout)
		return ""
	}
}

// startE2E starts a gateway on the testdata/e2e fixture (its own copy, so
// the test may edit the rules) with a gate behind the slow tool.
func startE2E(t *testing.T) (*gateway, *gate) {
	t.Helper()
	gt := startGate(t)
	g := startGateway(t, gatewayOptions{
		Config: "turngate.yaml",
		Dir:    fixture(t, "e2e"),
		Env:    []string{"TURNGATE_TEST_GATE_URL=" + gt.URL},
	})
	// Runs before the gateway's stop: no turn is left waiting on the gate.
	t.Cleanup(gt.release)
	return g, gt
}

// uiMessage is a stored message as GET …/messages returns it.
type uiMessage struct {
	ID    string   `json:"id"`
	Role  string   `json:"role"`
	Parts []uiPart `json:"parts"`
}

// uiPart is one part of a uiMessage.
type uiPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	State      string          `json:"state,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
}

// text joins the message's text parts.
func (m uiMessage) text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// history returns a session's stored messages.
func (g *gateway) history(agent, session string) []uiMessage {
	g.t.Helper()
	var out struct {
		Messages []uiMessage `json:"messages"`
	}
	g.json(http.MethodGet, "/v1/agents/"+agent+"/sessions/"+session+"/messages", nil, http.StatusOK, &out)
	return out.Messages
}

// TestEmbeddedDefaults runs `turngate serve` with no config from a
// directory holding only a copy of the shipped rules, as the quick start
// does, and has a chat that calls a tool.
func TestEmbeddedDefaults(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(repoRoot, "rules")
	if _, err := os.Stat(rules); err != nil {
		t.Fatalf("the repository has no shipped rules directory: %v", err)
	}
	copyDir(t, rules, filepath.Join(dir, "rules"))
	g := startGateway(t, gatewayOptions{Dir: dir})

	g.json(http.MethodGet, "/readyz", nil, http.StatusOK, nil)
	s := g.chat("demo", userChat("quickstart-1", "u1", "What is the weather in Paris?", nil))
	if s.messageID() == "" {
		t.Errorf("start carries no messageId: %v", s.types())
	}
	tc, ok := s.toolCall("weather")
	if !ok || tc.State != "tool-output-available" {
		t.Fatalf("no weather tool output in the stream:\n%s", s)
	}
	if !strings.Contains(string(tc.Output), `"Paris"`) {
		t.Errorf("weather output = %s, want it to name Paris", tc.Output)
	}
	if got := s.text(); !strings.Contains(got, "Here is the weather") {
		t.Errorf("text = %q, want the weather summary", got)
	}
	if s.finishReason() != "stop" {
		t.Errorf("finishReason = %q, want stop", s.finishReason())
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err != nil {
		t.Errorf("the default store is not under ./data: %v", err)
	}

	// The shipped rules refuse delete for a read-only client.
	blocked := g.chat("demo", userChat("quickstart-2", "u1", "delete /tmp/report.txt", map[string]any{"mode": "read-only"}))
	if tc, ok := blocked.toolCall("delete"); !ok || !strings.Contains(string(tc.Output), "read-only") {
		t.Errorf("the shipped rules did not block delete in read-only mode:\n%s", blocked)
	}
}

// TestToolPolicyInStream shows a blocked and a rewritten tool call in the
// stream and in the stored history.
func TestToolPolicyInStream(t *testing.T) {
	g, _ := startE2E(t)

	t.Run("blocked", func(t *testing.T) {
		s := g.chat("demo", userChat("policy-block", "u1", "delete /etc/passwd", map[string]any{"mode": "read-only"}))
		tc, ok := s.toolCall("delete")
		if !ok || tc.State != "tool-output-available" {
			t.Fatalf("no delete tool output in the stream:\n%s", s)
		}
		var reason string
		if err := json.Unmarshal(tc.Output, &reason); err != nil || !strings.Contains(reason, "read-only") {
			t.Errorf("delete output = %s, want the block reason as a string", tc.Output)
		}
		if !strings.Contains(s.text(), "read-only") {
			t.Errorf("the model's answer %q does not relay the block reason", s.text())
		}
		rec := g.waitAudit("the blocked delete", toolDecision("policy-block", "delete"))
		if d, _ := rec["decision"].(map[string]any); d["action"] != "block" {
			t.Errorf("audit record = %v, want decision.action block", rec)
		}
		if line := g.metricLine("turngate_tool_calls_total", `tool="delete"`, `decision="block"`, `tenant="default"`); line == "" {
			t.Error("no turngate_tool_calls_total sample of tenant default for the blocked delete")
		}
	})

	t.Run("allowed without read-only", func(t *testing.T) {
		s := g.chat("demo", userChat("policy-allow", "u1", "delete /tmp/scratch", nil))
		tc, ok := s.toolCall("delete")
		if !ok || !strings.Contains(string(tc.Output), `"deleted"`) {
			t.Fatalf("delete did not run:\n%s", s)
		}
	})

	t.Run("rewritten", func(t *testing.T) {
		s := g.chat("demo", userChat("policy-patch", "u1", "search turngate docs", nil))
		tc, ok := s.toolCall("search")
		if !ok || tc.State != "tool-output-available" {
			t.Fatalf("no search tool output in the stream:\n%s", s)
		}
		var out struct {
			Limit int `json:"limit"`
		}
		if err := json.Unmarshal(tc.Output, &out); err != nil || out.Limit != 50 {
			t.Errorf("search ran with %s, want limit 50", tc.Output)
		}
		rec := g.waitAudit("the rewritten search", toolDecision("policy-patch", "search"))
		if rec["outcome"] != "matched" {
			t.Errorf("audit record = %v, want outcome matched", rec)
		}
		msgs := g.history("demo", "policy-patch")
		if len(msgs) != 2 || msgs[1].Role != "assistant" {
			t.Fatalf("history = %+v, want the user message and one assistant message", msgs)
		}
		var stored json.RawMessage
		for _, p := range msgs[1].Parts {
			if p.Type == "tool-search" {
				stored = p.Output
			}
		}
		if !strings.Contains(string(stored), `"limit":50`) {
			t.Errorf("stored search output = %s, want limit 50", stored)
		}
	})
}

// rulesStatus is the part of GET /v1/admin/rules the tests read.
type rulesStatus struct {
	Revision string `json:"revision"`
}

// TestRulesHotReload edits a rule file of the live gateway's rules
// directory and sees the new rule decide the next turn.
func TestRulesHotReload(t *testing.T) {
	g, _ := startE2E(t)
	var before rulesStatus
	g.json(http.MethodGet, "/v1/admin/rules", nil, http.StatusOK, &before)
	if before.Revision == "" {
		t.Fatal("GET /v1/admin/rules has no revision")
	}

	s := g.chat("demo", userChat("reload-1", "u1", "weather in Oslo", nil))
	if tc, ok := s.toolCall("weather"); !ok || !strings.Contains(string(tc.Output), `"Oslo"`) {
		t.Fatalf("weather did not run before the edit:\n%s", s)
	}

	file := filepath.Join(g.opts.Dir, "rules", "tool_call.rego")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	edited := string(data) + "\nblock contains \"weather lookups are paused\" if {\n\tinput.tool.name == \"weather\"\n}\n"
	if err := os.WriteFile(file, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	poll(t, "the gateway serves a new rule revision", func() error {
		var now rulesStatus
		if code, err := g.getJSON("/v1/admin/rules", &now); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d: %v", code, err)
		}
		if now.Revision == before.Revision {
			return fmt.Errorf("revision is still %s", now.Revision)
		}
		return nil
	})

	s = g.chat("demo", userChat("reload-2", "u1", "weather in Oslo", nil))
	tc, ok := s.toolCall("weather")
	if !ok || !strings.Contains(string(tc.Output), "weather lookups are paused") {
		t.Fatalf("the edited rule did not block weather:\n%s", s)
	}
	old := g.waitAudit("the first weather call", toolDecision("reload-1", "weather"))
	rec := g.waitAudit("the blocked weather call", toolDecision("reload-2", "weather"))
	if rec["revision"] == old["revision"] {
		t.Errorf("both turns' audit records name revision %v; the second must run on the edited rules", rec["revision"])
	}
}

// submission is the status document of a durable submission.
type submission struct {
	SubmissionID string          `json:"submissionId"`
	Status       string          `json:"status"`
	Result       json.RawMessage `json:"result"`
}

// waitCompleted polls the submission id of the agent's session until it
// is completed (after a restart, its re-run) and returns it.
func waitCompleted(t *testing.T, g *gateway, agent, session, id string) submission {
	t.Helper()
	var sub submission
	poll(t, "the submission completes after the restart", func() error {
		var now submission
		if code, err := g.getJSON("/v1/agents/"+agent+"/sessions/"+session+"/submissions/"+id, &now); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d: %v", code, err)
		}
		if now.Status != "completed" {
			return fmt.Errorf("status is %q", now.Status)
		}
		sub = now
		return nil
	})
	return sub
}

// TestSubmissionSurvivesKill accepts a submission, kills the gateway with
// SIGKILL while its turn waits on a tool, restarts it on the same database
// and sees the submission run to completion exactly once.
func TestSubmissionSurvivesKill(t *testing.T) {
	g, gt := startE2E(t)
	submissionSurvivesKill(t, g, gt, "durable-1")
}

// submissionSurvivesKill accepts a submission in session, kills g with
// SIGKILL while its turn waits on gt's slow tool, restarts g on the same
// store and checks that the submission runs to completion exactly once.
func submissionSurvivesKill(t *testing.T, g *gateway, gt *gate, session string) {
	t.Helper()
	var sub submission
	g.json(http.MethodPost, "/v1/agents/demo/sessions/"+session+"/messages",
		map[string]any{"text": "slow job delta", "async": true}, http.StatusAccepted, &sub)
	if sub.SubmissionID == "" {
		t.Fatalf("202 without a submission id: %+v", sub)
	}
	if job := gt.waitCall(t); job != "delta" {
		t.Fatalf("slow tool called for job %q, want delta", job)
	}

	g.Kill()
	gt.release()
	g.start()

	sub = waitCompleted(t, g, "demo", session, sub.SubmissionID)
	if !strings.Contains(string(sub.Result), "Job finished") {
		t.Errorf("submission result = %s, want the finished job's answer", sub.Result)
	}
	msgs := g.history("demo", session)
	users := 0
	for _, m := range msgs {
		if m.Role == "user" {
			users++
		}
	}
	if users != 1 || len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant" {
		t.Fatalf("history = %+v, want one user message answered by the assistant", msgs)
	}
	if got := msgs[len(msgs)-1].text(); strings.Count(got, "Job finished") != 1 {
		t.Errorf("assistant text = %q, want exactly one finished-job answer", got)
	}
}

// TestCancelMidStream cancels a turn while its tool runs: the stream ends
// cleanly, the partial assistant message is stored, and the session takes
// the next turn.
func TestCancelMidStream(t *testing.T) {
	g, gt := startE2E(t)
	const session = "cancel-1"
	r := g.openChat("demo", userChat(session, "u1", "slow job beta", nil))
	if _, err := r.until("tool-input-available"); err != nil {
		t.Fatal(err)
	}
	gt.waitCall(t)

	var out struct {
		Cancelled bool `json:"cancelled"`
	}
	g.json(http.MethodPost, "/v1/agents/demo/sessions/"+session+"/cancel", nil, http.StatusOK, &out)
	if !out.Cancelled {
		t.Fatal("cancel answered cancelled: false for a running turn")
	}
	s, err := r.finish()
	if err != nil {
		t.Fatalf("the cancelled stream violates the protocol: %v\n%s", err, s)
	}
	if slices.Contains(s.types(), "tool-output-available") {
		t.Errorf("the cancelled tool call still produced an output:\n%s", s)
	}

	var msgs []uiMessage
	poll(t, "the partial assistant message is stored", func() error {
		msgs = g.history("demo", session)
		if len(msgs) != 2 || msgs[1].Role != "assistant" {
			return fmt.Errorf("history has %d messages", len(msgs))
		}
		return nil
	})
	if got := msgs[1].text(); !strings.Contains(got, "Starting job beta.") {
		t.Errorf("partial assistant text = %q, want the text streamed before the cancel", got)
	}

	next := g.chat("demo", userChat(session, "u2", "weather in Rome", nil))
	if _, ok := next.toolCall("weather"); !ok {
		t.Fatalf("the session did not take a turn after the cancel:\n%s", next)
	}
}

// TestReconnectReplay reconnects to a running turn: the GET replays the
// response from its first chunk and then follows it; once the turn is over
// the GET answers 204.
func TestReconnectReplay(t *testing.T) {
	g, gt := startE2E(t)
	const session = "resume-1"
	post := g.openChat("demo", userChat(session, "u1", "slow job gamma", nil))
	if _, err := post.until("tool-input-available"); err != nil {
		t.Fatal(err)
	}
	gt.waitCall(t)

	resp := g.do(http.MethodGet, "/v1/agents/demo/chat/"+session+"/stream", nil)
	checkStreamResponse(t, resp)
	get := newUIStreamReader(resp.Body)
	if _, err := get.until("tool-input-available"); err != nil {
		t.Fatal(err)
	}
	if !sameChunks(post.Chunks, get.Chunks) {
		t.Fatalf("the replay differs from the original so far:\nPOST:\n%s\nGET:\n%s",
			&uiStream{Chunks: post.Chunks}, &uiStream{Chunks: get.Chunks})
	}

	gt.release()
	ps, err := post.finish()
	if err != nil {
		t.Fatalf("POST stream: %v\n%s", err, ps)
	}
	gs, err := get.finish()
	if err != nil {
		t.Fatalf("GET stream: %v\n%s", err, gs)
	}
	if !sameChunks(ps.Chunks, gs.Chunks) {
		t.Fatalf("the replayed stream differs from the original:\nPOST:\n%s\nGET:\n%s", ps, gs)
	}
	if !strings.Contains(ps.text(), "Job finished") {
		t.Errorf("text = %q, want the finished job", ps.text())
	}

	poll(t, "GET …/stream answers 204 after the turn", func() error {
		resp := g.do(http.MethodGet, "/v1/agents/demo/chat/"+session+"/stream", nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// sameChunks reports whether a and b hold the same chunks in order.
func sameChunks(a, b []chunk) bool {
	return slices.EqualFunc(a, b, func(x, y chunk) bool { return string(x.Raw) == string(y.Raw) })
}

// TestTurnLockQueue holds a session's turn on the gate and sends two more
// requests for it: with one queue slot, one waits and the other is refused
// with 429; the waiting one runs after the first turn, in order.
func TestTurnLockQueue(t *testing.T) {
	g, gt := startE2E(t)
	const session = "lock-1"
	r := g.openChat("demo", userChat(session, "u1", "slow job epsilon", nil))
	if _, err := r.until("tool-input-available"); err != nil {
		t.Fatal(err)
	}
	gt.waitCall(t)

	type result struct {
		code int
		body string
		err  error
	}
	results := make(chan result, 2)
	for _, text := range []string{"hello two", "hello three"} {
		go func() {
			code, body, err := g.try(http.MethodPost, "/v1/agents/demo/sessions/"+session+"/messages", map[string]any{"text": text})
			results <- result{code, string(body), err}
		}()
	}
	var refused result
	select {
	case refused = <-results:
	case <-time.After(pollTimeout):
		t.Fatal("neither queued request was refused while the turn held the lock")
	}
	if refused.err != nil || refused.code != http.StatusTooManyRequests || !strings.Contains(refused.body, "too_many_queued_turns") {
		t.Fatalf("first answer = %d %s (%v), want 429 too_many_queued_turns", refused.code, refused.body, refused.err)
	}

	gt.release()
	if s, err := r.finish(); err != nil {
		t.Fatalf("the first turn's stream: %v\n%s", err, s)
	}
	queued := <-results
	if queued.err != nil || queued.code != http.StatusOK || !strings.Contains(queued.body, "Echo: hello") {
		t.Fatalf("the queued request = %d %s (%v), want its answer", queued.code, queued.body, queued.err)
	}
	msgs := g.history("demo", session)
	if len(msgs) != 4 {
		t.Fatalf("history = %+v, want two turns", msgs)
	}
	if !strings.Contains(msgs[1].text(), "Job finished") || !strings.HasPrefix(msgs[3].text(), "Echo: hello") {
		t.Errorf("turns out of order: %q then %q", msgs[1].text(), msgs[3].text())
	}
}

// TestGracefulShutdown sends SIGTERM while a turn waits on a tool: the
// gateway lets the turn finish, the client gets the whole stream, the
// answer is stored, and the process exits 0.
func TestGracefulShutdown(t *testing.T) {
	g, gt := startE2E(t)
	const session = "shutdown-1"
	r := g.openChat("demo", userChat(session, "u1", "slow job zeta", nil))
	if _, err := r.until("tool-input-available"); err != nil {
		t.Fatal(err)
	}
	gt.waitCall(t)

	g.Terminate()
	poll(t, "the gateway logs its shutdown", func() error {
		if !strings.Contains(g.Stderr.String(), "shutting down") {
			return fmt.Errorf("no shutdown log line yet")
		}
		return nil
	})
	gt.release()
	s, err := r.finish()
	if err != nil {
		t.Fatalf("the in-flight stream: %v\n%s", err, s)
	}
	if s.finishReason() != "stop" || !strings.Contains(s.text(), "Job finished") {
		t.Errorf("the in-flight turn did not finish normally:\n%s", s)
	}
	if code := g.Wait(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}

	g.start()
	msgs := g.history("demo", session)
	if len(msgs) != 2 || !strings.Contains(msgs[1].text(), "Job finished") {
		t.Errorf("stored history = %+v, want the finished answer", msgs)
	}
}
