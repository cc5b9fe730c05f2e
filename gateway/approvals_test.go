package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
)

// Keys of the approval tests: a chat user, an ops approver, and an ops
// approver of another tenant.
const (
	userKey  = "user-key-0001"
	opsKey   = "ops-key-0001"
	otherKey = "other-key-0001"
	adminKey = "acme-admin-key-0001"
)

func withApprovalKeys(c *config.Config) {
	c.Auth.APIKeys = []config.APIKey{
		{Key: userKey, Tenant: "acme", Subject: "alice"},
		{Key: opsKey, Tenant: "acme", Subject: "olga", Roles: []string{"ops"}},
		{Key: otherKey, Tenant: "globex", Subject: "mallory", Roles: []string{"ops", "admin"}},
		{Key: adminKey, Tenant: "acme", Subject: "ada", Roles: []string{"admin"}},
	}
}

func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }

// askApproval sends a chat message whose delete call waits for approval
// and returns the stream and the stored assistant message.
func askApproval(t *testing.T, g *testGateway, session, path string, headers ...string) ([]chunk, engine.UIMessage) {
	t.Helper()
	chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody(session, "u-"+session, "delete "+path), headers...))
	checkUIStream(t, chunks)
	got := types(chunks)
	i := slices.Index(got, "tool-approval-request")
	if i < 1 || got[i-1] != "tool-input-available" || got[len(got)-1] != "finish" || chunks[len(chunks)-1].str("finishReason") != "tool-calls" {
		t.Fatalf("stream %q", got)
	}
	h := historyAs(t, g, session, headers...)
	m := h[len(h)-1]
	p := toolPart(t, m)
	if p.State != engine.ToolStateApprovalRequested || p.Approval == nil || p.Approval.ID != chunks[i].str("approvalId") {
		t.Fatalf("stored part %+v", p)
	}
	return chunks, m
}

func historyAs(t *testing.T, g *testGateway, session string, headers ...string) []engine.UIMessage {
	t.Helper()
	var out struct {
		Messages []engine.UIMessage `json:"messages"`
	}
	g.doJSON("GET", "/v1/agents/demo/sessions/"+session+"/messages", nil, http.StatusOK, &out, headers...)
	return out.Messages
}

// toolPart returns m's delete part.
func toolPart(t *testing.T, m engine.UIMessage) engine.UIPart {
	t.Helper()
	for _, p := range m.Parts {
		if p.Type == "tool-delete" {
			return p
		}
	}
	t.Fatalf("no delete part in %+v", m)
	return engine.UIPart{}
}

// answerBody is the AI SDK client's resubmission after
// addToolApprovalResponse: the assistant message with the part in
// approval-responded, messageId the assistant's id.
func answerBody(session string, m engine.UIMessage, approvalID string, approved bool, reason string) map[string]any {
	parts := make([]any, 0, len(m.Parts))
	for _, p := range m.Parts {
		if p.Type == "tool-delete" {
			parts = append(parts, map[string]any{"type": p.Type, "toolCallId": p.ToolCallID, "state": "approval-responded", "input": p.Input,
				"approval": map[string]any{"id": approvalID, "approved": approved, "reason": reason}})
			continue
		}
		parts = append(parts, p)
	}
	return map[string]any{"id": session, "trigger": "submit-message", "messageId": m.ID, "messages": []any{
		map[string]any{"id": "u-" + session, "role": "user", "parts": []any{map[string]any{"type": "text", "text": "delete"}}},
		map[string]any{"id": m.ID, "role": "assistant", "parts": parts},
	}}
}

func TestApprovalByChatUser(t *testing.T) {
	g := newTestGateway(t, "approval")
	for _, tt := range []struct {
		name      string
		approved  bool
		wantChunk string
		wantState string
		wantText  string
	}{
		{"approved", true, "tool-output-available", engine.ToolStateOutputAvailable, `The delete tool returned: {"deleted":"/tmp/a"}`},
		{"denied", false, "tool-output-denied", engine.ToolStateOutputDenied, "The delete tool failed: " + engine.ApprovalDeniedText + " Reason: not now"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			session := "chat-" + tt.name
			chunks, m := askApproval(t, g, session, "/tmp/a")
			id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
			if r := chunks[slices.Index(types(chunks), "tool-approval-request")].str("reason"); r != "deletes a file" {
				t.Errorf("reason %q", r)
			}
			resp := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", answerBody(session, m, id, tt.approved, "not now")))
			checkUIStream(t, resp)
			got := types(resp)
			if len(got) < 3 || got[0] != "start" || got[1] != tt.wantChunk || got[2] != "start-step" || resp[0].str("messageId") != m.ID {
				t.Fatalf("continuation %q", got)
			}
			h := g.history("demo", session)
			last := h[len(h)-1]
			p := toolPart(t, last)
			if p.State != tt.wantState || p.Approval == nil || p.Approval.Approved == nil || *p.Approval.Approved != tt.approved {
				t.Errorf("part %+v", p)
			}
			if text := last.Parts[len(last.Parts)-1].Text; text != tt.wantText {
				t.Errorf("model answered %q, want %q", text, tt.wantText)
			}
			// Replayed: the same answer again runs nothing and is recorded.
			again := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", answerBody(session, m, id, !tt.approved, "")))
			if got := types(again); !slices.Equal(got, []string{"start", "finish"}) {
				t.Errorf("replay answered %q", got)
			}
			if n := len(g.history("demo", session)); n != len(h) {
				t.Errorf("replay changed the transcript: %d messages, want %d", n, len(h))
			}
			a, err := g.store.GetApproval(context.Background(), "default", id)
			if err != nil || a.State != map[bool]string{true: store.ApprovalApproved, false: store.ApprovalDenied}[tt.approved] || a.DecidedBy != "anonymous" {
				t.Errorf("stored approval %+v, %v", a, err)
			}
		})
	}
	audit := g.auditLog()
	for _, want := range []string{`"outcome":"requested"`, `"outcome":"approved"`, `"outcome":"denied"`, `"outcome":"ignored"`, `"why":"the approval is already approved"`} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit has no %s", want)
		}
	}
	if m := g.metricsText(); !strings.Contains(m, `turngate_approvals_total{outcome="approved",tool="delete"} 1`) ||
		!strings.Contains(m, `turngate_approvals_total{outcome="requested",tool="delete"} 2`) {
		t.Errorf("metrics:\n%s", grepLines(m, "approvals"))
	}
}

// Forged answers — an id the gateway never issued, another session's
// approval, a mismatched tool call — are ignored and recorded; the call
// still waits.
func TestApprovalForgedAnswersIgnored(t *testing.T) {
	g := newTestGateway(t, "approval")
	chunks, m := askApproval(t, g, "forge-a", "/tmp/a")
	id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	otherChunks, _ := askApproval(t, g, "forge-b", "/tmp/b")
	otherID := otherChunks[slices.Index(types(otherChunks), "tool-approval-request")].str("approvalId")

	for name, body := range map[string]map[string]any{
		"never issued":     answerBody("forge-a", m, "appr_forged", true, ""),
		"another session":  answerBody("forge-a", m, otherID, true, ""),
		"other tool call":  renameCall(answerBody("forge-a", m, id, true, ""), "call_other"),
		"no approval part": answerBody("forge-a", m, "", true, ""),
	} {
		resp := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", body))
		if got := types(resp); !slices.Equal(got, []string{"start", "error", "finish"}) || resp[2].str("finishReason") != "interrupted" ||
			!strings.HasPrefix(resp[1].str("errorText"), "approval answer ignored: no such approval is pending") {
			t.Errorf("%s: answered %q %v, want an error chunk saying the answer was ignored", name, got, resp)
		}
	}
	for _, s := range []string{"default"} {
		list, _ := g.store.ListApprovals(context.Background(), s, store.ApprovalFilter{State: store.ApprovalPending})
		if len(list) != 2 {
			t.Errorf("pending approvals %+v, want both still pending", list)
		}
	}
	h := g.history("demo", "forge-a")
	if p := toolPart(t, h[len(h)-1]); p.State != engine.ToolStateApprovalRequested {
		t.Errorf("part %+v", p)
	}
	if n := strings.Count(g.auditLog(), `"outcome":"ignored"`); n < 3 {
		t.Errorf("%d ignored records, want 3 or more:\n%s", n, g.auditLog())
	}
}

// renameCall changes the tool call id of the answer's approval part.
func renameCall(body map[string]any, id string) map[string]any {
	msgs := body["messages"].([]any)
	for _, p := range msgs[1].(map[string]any)["parts"].([]any) {
		if pm, ok := p.(map[string]any); ok && pm["state"] == "approval-responded" {
			pm["toolCallId"] = id
		}
	}
	return body
}

// A role approval: the chat client is told the call waits, but its own
// answer does not count; an ops principal lists and decides it through
// the API, at most once, and the turn resumes on its own.
func TestApprovalByRoleViaAPI(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys)
	chunks, m := askApproval(t, g, "role", "/big/db", bearer(userKey)...)
	req := chunks[slices.Index(types(chunks), "tool-approval-request")]
	id := req.str("approvalId")
	if req.str("reason") != "deletes a big file" {
		t.Errorf("reason %q", req.str("reason"))
	}
	// The chat user's own approval is ignored.
	// It is told so in an error chunk, not left to believe it counted.
	resp := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", answerBody("role", m, id, true, "me"), bearer(userKey)...))
	if got := types(resp); !slices.Equal(got, []string{"start", "error", "finish"}) ||
		!strings.Contains(resp[1].str("errorText"), "holds none of the approver roles role:ops") {
		t.Errorf("chat user's answer ran %q %v, want an error chunk naming the roles", got, resp)
	}
	if !strings.Contains(g.auditLog(), "holds none of the approver roles role:ops") {
		t.Error("the chat user's answer was not recorded as ignored")
	}

	var list struct {
		Approvals []approvalResponse `json:"approvals"`
	}
	g.doJSON("GET", "/v1/approvals?state=pending", nil, http.StatusOK, &list, bearer(userKey)...)
	if len(list.Approvals) != 0 {
		t.Errorf("a principal without the role sees %+v", list.Approvals)
	}
	g.doJSON("GET", "/v1/approvals?state=pending", nil, http.StatusOK, &list, bearer(otherKey)...)
	if len(list.Approvals) != 0 {
		t.Errorf("another tenant sees %+v", list.Approvals)
	}
	g.doJSON("GET", "/v1/approvals", nil, http.StatusOK, &list, bearer(opsKey)...)
	if len(list.Approvals) != 1 {
		t.Fatalf("ops sees %+v", list.Approvals)
	}
	a := list.Approvals[0]
	if a.ID != id || a.ToolName != "delete" || string(a.Input) != `{"path":"/big/db"}` || a.SessionID != "role" ||
		!strings.Contains(string(a.Reasons), "deletes a big file") || !a.ExpiresAt.After(a.RequestedAt) {
		t.Errorf("listed %+v", a)
	}
	g.doJSON("GET", "/v1/approvals?state=maybe", nil, http.StatusBadRequest, nil, bearer(opsKey)...)
	checkPendingGauge(t, g, map[string]int{"acme": 1, "globex": 0})

	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusNotFound, nil, bearer(otherKey)...)
	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusForbidden, nil, bearer(userKey)...)
	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"reason": "x"}, http.StatusBadRequest, nil, bearer(opsKey)...)
	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true, "extra": 1}, http.StatusBadRequest, nil, bearer(opsKey)...)

	// A concurrent double POST: one wins, the other is 409.
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := g.do("POST", "/v1/approvals/"+id, map[string]any{"approved": true, "reason": "ticket 42"}, bearer(opsKey)...)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	slices.Sort(codes)
	if !slices.Equal(codes, []int{http.StatusOK, http.StatusConflict}) {
		t.Errorf("double POST answered %v", codes)
	}
	last := waitForPart(t, g, "role", engine.ToolStateOutputAvailable, bearer(userKey)...)
	p := toolPart(t, last)
	if p.Approval == nil || p.Approval.Reason != "ticket 42" || string(p.Output) != `{"deleted":"/big/db"}` {
		t.Errorf("resumed part %+v", p)
	}
	if !strings.Contains(g.auditLog(), `"outcome":"approved"`) || !strings.Contains(g.auditLog(), `"by":"olga"`) {
		t.Error("no approved record by olga")
	}
	checkPendingGauge(t, g, map[string]int{"acme": 0, "globex": 0})
	_ = m
}

// checkPendingGauge checks /metrics's turngate_approvals_pending of each
// tenant of want.
func checkPendingGauge(t *testing.T, g *testGateway, want map[string]int) {
	t.Helper()
	m := g.metricsText()
	for tenant, n := range want {
		if line := fmt.Sprintf("turngate_approvals_pending{tenant=%q} %d\n", tenant, n); !strings.Contains(m, line) {
			t.Errorf("metrics lack %s:\n%s", strings.TrimSpace(line), grepLines(m, "approvals_pending"))
		}
	}
}

// waitForPart polls the session's history until its last message's delete
// part is in state (the resumed turn runs in the background).
func waitForPart(t *testing.T, g *testGateway, session, state string, headers ...string) engine.UIMessage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		h := historyAs(t, g, session, headers...)
		last := h[len(h)-1]
		for _, p := range last.Parts {
			if p.Type == "tool-delete" && p.State == state && last.Parts[len(last.Parts)-1].Type == engine.PartText {
				return last
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never reached %s: %+v", session, state, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// An approval nobody decides expires: denied with reason "expired", and
// the turn resumes with the model seeing that denial.
func TestApprovalExpires(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys, func(c *config.Config) { c.Limits.ApprovalExpiry = 50 * time.Millisecond })
	askApproval(t, g, "exp", "/big/db", bearer(userKey)...)
	last := waitForPart(t, g, "exp", engine.ToolStateOutputDenied, bearer(userKey)...)
	if p := toolPart(t, last); p.Approval == nil || p.Approval.Reason != "expired" {
		t.Errorf("part %+v", p)
	}
	want := "The delete tool failed: " + engine.ApprovalDeniedText + " Reason: expired"
	if text := last.Parts[len(last.Parts)-1].Text; text != want {
		t.Errorf("model answered %q, want %q", text, want)
	}
	if !strings.Contains(g.auditLog(), `"outcome":"expired"`) {
		t.Error("no expired record")
	}
}

// Pending approvals survive a restart: a new process on the same store
// lists and decides them, and the turn resumes.
func TestApprovalSurvivesRestart(t *testing.T) {
	cfg := testConfig(t, "approval")
	withApprovalKeys(cfg)
	g := startGateway(t, cfg, Options{})
	askApproval(t, g, "restart", "/big/db", bearer(userKey)...)
	g.close()

	g = startGateway(t, cfg, Options{})
	var list struct {
		Approvals []approvalResponse `json:"approvals"`
	}
	g.doJSON("GET", "/v1/approvals?state=pending", nil, http.StatusOK, &list, bearer(opsKey)...)
	if len(list.Approvals) != 1 {
		t.Fatalf("after restart ops sees %+v", list.Approvals)
	}
	g.doJSON("POST", "/v1/approvals/"+list.Approvals[0].ID, map[string]any{"approved": false, "reason": "no"}, http.StatusOK, nil, bearer(opsKey)...)
	last := waitForPart(t, g, "restart", engine.ToolStateOutputDenied, bearer(userKey)...)
	if p := toolPart(t, last); p.Approval.Reason != "no" {
		t.Errorf("part %+v", p)
	}
	// The history: decided lists it, pending no longer.
	id := list.Approvals[0].ID
	g.doJSON("GET", "/v1/approvals?state=decided", nil, http.StatusOK, &list, bearer(opsKey)...)
	if len(list.Approvals) != 1 || list.Approvals[0].ID != id || list.Approvals[0].State != store.ApprovalDenied || list.Approvals[0].Reason != "no" {
		t.Errorf("state=decided lists %+v, want the denied %s", list.Approvals, id)
	}
	g.doJSON("GET", "/v1/approvals?state=pending", nil, http.StatusOK, &list, bearer(opsKey)...)
	if len(list.Approvals) != 0 {
		t.Errorf("state=pending still lists %+v", list.Approvals)
	}
}

// The last approval of a message decided through the API while an expiry
// sweep runs: whichever decides it queues the turn's resume, with the
// decision, exactly once; the API answers 200, or 409 when the sweep won.
func TestApprovalLastDecisionRacesExpiry(t *testing.T) {
	forEachDriver(t, func(t *testing.T, mod func(*config.Config)) {
		ctx := context.Background()
		g := newTestGateway(t, "approval", withApprovalKeys, mod)
		// No worker runs the resumes, no sweep but the test's: the test
		// drains the queue itself.
		g.srv.subs.stop()
		g.srv.subs.wait()
		const sessions = 6
		ids := make([][]string, sessions)
		for i := range ids {
			session := "race" + strconv.Itoa(i)
			for _, c := range readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody(session, "u-"+session, "delete both /big/a and /big/b"), bearer(userKey)...)) {
				if c.str("type") == "tool-approval-request" {
					ids[i] = append(ids[i], c.str("approvalId"))
				}
			}
			if len(ids[i]) != 2 {
				t.Fatalf("session %s asked %v", session, ids[i])
			}
			// One decided: the other still waits, nothing resumes.
			g.doJSON("POST", "/v1/approvals/"+ids[i][0], map[string]any{"approved": true}, http.StatusOK, nil, bearer(opsKey)...)
		}
		if q := drainSubmissions(t, g.store); len(q) != 0 {
			t.Fatalf("resumes queued with approvals pending: %+v", q)
		}

		codes := make([]int, sessions)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				resp := g.do("POST", "/v1/approvals/"+ids[i][1], map[string]any{"approved": true}, bearer(opsKey)...)
				resp.Body.Close()
				codes[i] = resp.StatusCode
			})
		}
		wg.Go(func() { g.srv.expireApprovals(ctx, time.Now().Add(2*g.cfg.Limits.ApprovalExpiry)) })
		wg.Wait()

		resumes := map[string][]string{}
		for _, sub := range drainSubmissions(t, g.store) {
			resumes[sub.SessionID] = append(resumes[sub.SessionID], sub.IdempotencyKey)
		}
		for i := range ids {
			a, err := g.store.GetApproval(ctx, "acme", ids[i][1])
			if err != nil {
				t.Fatal(err)
			}
			want := map[int]string{http.StatusOK: store.ApprovalApproved, http.StatusConflict: store.ApprovalExpired}[codes[i]]
			if a.State != want {
				t.Errorf("decision answered %d, approval %s", codes[i], a.State)
			}
			if got := resumes[a.SessionID]; !slices.Equal(got, []string{approvalResumeKey(a.RequestID)}) {
				t.Errorf("session %s: resumes %v, want one %s", a.SessionID, got, approvalResumeKey(a.RequestID))
			}
		}
	})
}

// drainSubmissions claims and finishes every claimable submission of st,
// and returns them in claim order.
func drainSubmissions(t *testing.T, st store.Store) []store.Submission {
	t.Helper()
	ctx := context.Background()
	var out []store.Submission
	for {
		sub, err := st.ClaimSubmission(ctx, "test", time.Hour)
		if errors.Is(err, store.ErrNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := st.FinishSubmission(ctx, sub.ID, sub.Attempts, store.StatusSkipped, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		out = append(out, *sub)
	}
}

// An approved call is evaluated again on the live revision: a block
// loaded since wins.
func TestApprovalReevaluatedOnLiveRules(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "rules", "approval", "tools.rego"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.rego"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	g := newTestGateway(t, "approval", func(c *config.Config) { c.Rules.Dir = dir })
	chunks, m := askApproval(t, g, "live", "/tmp/a")
	id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	block := "package turngate.tool_call\n\nblock contains \"deletes are frozen\" if input.tool.name == \"delete\"\n"
	if err := os.WriteFile(filepath.Join(dir, "freeze.rego"), []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	g.doJSON("POST", "/v1/admin/rules/reload", nil, http.StatusOK, nil)
	resp := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", answerBody("live", m, id, true, "")))
	if got := types(resp); len(got) < 2 || got[1] != "tool-output-available" || !strings.Contains(string(resp[1]["output"].(string)), "frozen") {
		t.Errorf("continuation %q %v", got, resp[1])
	}
}

// The programmatic entry paths return the pending approval; the
// OpenAI-compatible endpoint, which cannot wait, says the call did not run.
func TestApprovalOtherEntryPaths(t *testing.T) {
	g := newTestGateway(t, "approval")
	var res turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/save/messages", map[string]any{"text": "delete /tmp/s"}, http.StatusOK, &res)
	if res.FinishReason != engine.FinishToolCalls || len(res.PendingApprovals) != 1 || res.PendingApprovals[0].ToolName != "delete" ||
		res.PendingApprovals[0].Reasons[0].Reason != "deletes a file" {
		t.Fatalf("saveMessages result %+v", res)
	}
	// The API decides a chat-user approval too; the turn resumes.
	g.doJSON("POST", "/v1/approvals/"+res.PendingApprovals[0].ApprovalID, map[string]any{"approved": true}, http.StatusOK, nil)
	waitForPart(t, g, "save", engine.ToolStateOutputAvailable)

	var out struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   string `json:"content"`
				ToolCalls []any  `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	g.doJSON("POST", "/v1/chat/completions", map[string]any{"model": "demo", "messages": []any{map[string]any{"role": "user", "content": "delete /tmp/o"}}}, http.StatusOK, &out)
	if len(out.Choices) != 1 || out.Choices[0].FinishReason != "stop" || len(out.Choices[0].Message.ToolCalls) != 0 ||
		!strings.Contains(out.Choices[0].Message.Content, "needs approval (deletes a file)") {
		t.Errorf("openai answered %+v", out)
	}
	resp := g.do("POST", "/v1/chat/completions", map[string]any{"model": "demo", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "delete /tmp/p"}}})
	defer resp.Body.Close()
	payloads, done := sseEvents(t, resp.Body)
	all := strings.Join(payloads, "\n")
	if !done || !strings.Contains(all, "needs approval (deletes a file)") || !strings.Contains(all, `"finish_reason":"stop"`) || strings.Contains(all, "tool_calls") {
		t.Errorf("streamed openai answer:\n%s", all)
	}
}

// continue on a message awaiting approval runs nothing and answers the
// pending approval; once it is decided, continue resumes the turn.
func TestApprovalContinue(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys)
	askApproval(t, g, "cont", "/big/db", bearer(userKey)...)
	var res turnResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/cont/continue", nil, http.StatusOK, &res, bearer(userKey)...)
	if res.Status != StatusSkipped || len(res.PendingApprovals) != 1 || res.PendingApprovals[0].Reasons[0].Approvers[0] != "role:ops" {
		t.Fatalf("continue while pending: %+v", res)
	}
	g.doJSON("POST", "/v1/approvals/"+res.PendingApprovals[0].ApprovalID, map[string]any{"approved": true}, http.StatusOK, nil, bearer(opsKey)...)
	waitForPart(t, g, "cont", engine.ToolStateOutputAvailable, bearer(userKey)...)
}

// A step that calls a client tool and a tool needing approval continues
// once the client's output and the answer come back together, as the AI
// SDK client sends them.
func TestApprovalWithClientToolInOneStep(t *testing.T) {
	g := newTestGateway(t, "approval")
	chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("both", "u-both", "confirm and delete /tmp/z")))
	req := chunks[slices.Index(types(chunks), "tool-approval-request")]
	h := g.history("demo", "both")
	m := h[len(h)-1]
	body := answerBody("both", m, req.str("approvalId"), true, "")
	parts := body["messages"].([]any)[1].(map[string]any)["parts"].([]any)
	for i, p := range parts {
		if up, ok := p.(engine.UIPart); ok && up.Type == "tool-confirm" {
			parts[i] = map[string]any{"type": "tool-confirm", "toolCallId": up.ToolCallID, "state": "output-available", "input": up.Input, "output": "yes"}
		}
	}
	resp := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", body))
	if got := types(resp); len(got) < 3 || got[1] != "tool-output-available" || !slices.Contains(got, "start-step") {
		t.Fatalf("continuation %q", got)
	}
	h = g.history("demo", "both")
	last := h[len(h)-1]
	states := map[string]string{}
	for _, p := range last.Parts {
		if p.IsTool() {
			states[p.Type] = p.State
		}
	}
	if states["tool-confirm"] != engine.ToolStateOutputAvailable || states["tool-delete"] != engine.ToolStateOutputAvailable {
		t.Errorf("states %v", states)
	}
	if text := last.Parts[len(last.Parts)-1].Text; text != "You answered: yes" {
		t.Errorf("model answered %q", text)
	}
}

// A new user message instead of an answer denies the waiting approvals:
// approvers no longer see them, and a late decision is refused.
func TestApprovalSupersededByNewMessage(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys)
	chunks, _ := askApproval(t, g, "moved", "/big/db", bearer(userKey)...)
	id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("moved", "u-next", "weather in Oslo"), bearer(userKey)...))
	a, err := g.store.GetApproval(context.Background(), "acme", id)
	if err != nil || a.State != store.ApprovalDenied || a.Reason != supersededReason {
		t.Fatalf("approval %+v, %v", a, err)
	}
	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusConflict, nil, bearer(opsKey)...)
}

// A submission's result carries the pending approval; its decision
// resumes the turn.
func TestApprovalSubmission(t *testing.T) {
	g := newTestGateway(t, "approval")
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/async/messages", map[string]any{"text": "delete /tmp/q", "async": true}, http.StatusAccepted, &sub)
	sub = waitSubmission(t, g, "demo", "async", sub.SubmissionID)
	var res turnResponse
	if err := json.Unmarshal(sub.Result, &res); err != nil || sub.Status != "completed" || len(res.PendingApprovals) != 1 {
		t.Fatalf("submission %+v (%s), %v", sub, sub.Result, err)
	}
	g.doJSON("POST", "/v1/approvals/"+res.PendingApprovals[0].ApprovalID, map[string]any{"approved": false, "reason": "no"}, http.StatusOK, nil)
	waitForPart(t, g, "async", engine.ToolStateOutputDenied)
}

// FuzzDecodeDecision checks the approvers' decision decoder: a decision
// always says approved or not, with a bounded reason, and bad input is a
// 4xx.
func FuzzDecodeDecision(f *testing.F) {
	f.Add([]byte(`{"approved":true,"reason":"ticket 7"}`))
	f.Add([]byte(`{"approved":false}`))
	f.Add([]byte(`{"reason":"x"}`))
	f.Add([]byte(`{"approved":"yes"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeDecision(data)
		if rejected(t, "decoder", err) {
			return
		}
		if req.Approved == nil || len(req.Reason) > maxDecisionReason {
			t.Fatalf("accepted %+v", req)
		}
	})
}

// TestMayDecide: who may decide a role-gated approval, from the approval's
// record alone; one that does not say who asked for it fails closed.
func TestMayDecide(t *testing.T) {
	olga := engine.Principal{Tenant: "acme", Subject: "olga", Roles: []string{"ops"}}
	oscar := engine.Principal{Tenant: "acme", Subject: "oscar", Roles: []string{"ops"}}
	alice := engine.Principal{Tenant: "acme", Subject: "alice"}
	asked := func(p engine.Principal) json.RawMessage { b, _ := json.Marshal(p); return b }
	for _, tc := range []struct {
		name      string
		approvers []string
		requester json.RawMessage
		by        engine.Principal
		want      string
	}{
		{"chat-user approval", nil, asked(alice), alice, ""},
		{"another holder of the role", []string{"role:ops"}, asked(olga), oscar, ""},
		{"the requester itself", []string{"role:ops"}, asked(olga), olga, "asked for this approval itself"},
		{"the requester, allowed", []string{"role:ops", "requester"}, asked(olga), olga, ""},
		{"no role", []string{"role:ops"}, asked(olga), alice, "holds none of the approver roles role:ops"},
		{"a requester only, not the requester", []string{"requester"}, asked(olga), oscar, "holds none of the approver roles requester"},
		{"no requester recorded", []string{"role:ops"}, nil, oscar, "does not record which principal asked for it"},
		{"an unreadable requester", []string{"role:ops"}, json.RawMessage(`{"subject":`), oscar, "does not record which principal asked for it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mayDecide(tc.by, &store.Approval{Approvers: tc.approvers, Principal: tc.requester})
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("mayDecide = %q, want %q", got, tc.want)
			}
		})
	}
}
