package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file runs every example of examples/ as its README tells an
// operator to: from the example's folder (a copy, so ./data stays out of
// the repository), on its turngate.yaml, against the built binary. Each
// example has a scenario that asserts what a user would see — the UI
// stream, the stored history, the audit log, a dry run — plus subtests
// that run `turngate check` and `turngate test` on its rules and its own
// check.sh.

// exampleCase is one folder of examples/ and the scenario that shows it.
type exampleCase struct {
	name string
	run  func(t *testing.T, x *exampleRun)
	// env, if set, starts what the example needs besides the gateway and
	// returns the gateway's extra environment.
	env func(t *testing.T) []string
}

// exampleRun is one example's gateway, running in a copy of its folder.
type exampleRun struct {
	*gateway
	// dir is the copy the gateway runs in.
	dir string
}

// exampleCases lists every example; TestExamplesIndexed checks that the
// list, the folders and examples/README.md agree.
var exampleCases = []exampleCase{
	{"anthropic-client", exampleAnthropicClient, nil},
	{"approval-webhooks", exampleApprovalWebhooks, approvalReceiver},
	{"audit-every-tool-call", exampleAuditEveryToolCall, nil},
	{"console", exampleConsole, nil},
	{"cached-weather", exampleCachedWeather, nil},
	{"clamp-search-limit", exampleClampSearchLimit, nil},
	{"continuation-turns", exampleContinuationTurns, nil},
	{"extension-webhook", exampleExtensionWebhook, webhookExtension},
	{"fast-model-after-tool-results", exampleFastModelAfterToolResults, nil},
	{"force-search-first-step", exampleForceSearchFirstStep, nil},
	{"inbound-guards", exampleInboundGuards, inboundMetricsPort},
	{"jwt-auth", exampleJWTAuth, jwtIDP},
	{"kill-switch", exampleKillSwitch, nil},
	{"live-config", exampleLiveConfig, nil},
	{"long-chat-step-budget", exampleLongChatStepBudget, nil},
	{"outbound-guards", exampleOutboundGuards, outboundPartner},
	{"postgres-replicas", examplePostgresReplicas, examplePGSchema},
	{"prune-tool-calls", examplePruneToolCalls, nil},
	{"rate-limit-per-principal", exampleRateLimitPerPrincipal, nil},
	{"read-only-mode", exampleReadOnlyMode, nil},
	{"require-approval", exampleRequireApproval, nil},
	{"recovery-turn", exampleRecoveryTurn, nil},
	{"redact-pii-in-tool-input", exampleRedactPIIInToolInput, nil},
	{"redact-before-persist", exampleRedactBeforePersist, nil},
	{"redact-secrets-in-tool-output", exampleRedactSecretsInToolOutput, accountsService},
	{"restrict-active-tools", exampleRestrictActiveTools, nil},
	{"retention", exampleRetention, nil},
	{"shadow-rollout", exampleShadowRollout, nil},
	{"selected-file-context", exampleSelectedFileContext, nil},
	{"file-attachments", exampleFileAttachments, nil},
	{"exfiltration-chain", exampleExfiltrationChain, nil},
	{"payee-verified-first", examplePayeeVerifiedFirst, nil},
	{"session-memory", exampleSessionMemory, nil},
	{"stop-on-final-answer", exampleStopOnFinalAnswer, nil},
	{"structured-output", exampleStructuredOutput, nil},
	{"tenant-tool-allowlist", exampleTenantToolAllowlist, nil},
	{"token-budget-per-tenant", exampleTokenBudgetPerTenant, nil},
	{"tool-call-quota", exampleToolCallQuota, nil},
	{"tool-journal", exampleToolJournal, journalShop},
	{"tracing", exampleTracing, otlpCollector},
	{"trim-messages-on-later-steps", exampleTrimMessagesOnLaterSteps, nil},
	{"websocket-chat", exampleWebsocketChat, nil},
}

// TestExamples runs each example's scenario, its rule checks and its
// check.sh.
func TestExamples(t *testing.T) {
	for _, ex := range exampleCases {
		t.Run(ex.name, func(t *testing.T) {
			t.Parallel()
			src := filepath.Join(repoRoot, "examples", ex.name)
			t.Run("turngate check", func(t *testing.T) {
				runTurngate(t, src, "check", "rules/")
			})
			t.Run("turngate test", func(t *testing.T) {
				runTurngate(t, src, "test", "rules/")
			})
			t.Run("scenario", func(t *testing.T) {
				dir := t.TempDir()
				copyDir(t, src, dir)
				if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
					t.Fatal(err)
				}
				var env []string
				if ex.env != nil {
					env = ex.env(t)
				}
				g := startGateway(t, gatewayOptions{Config: "turngate.yaml", Dir: dir, Env: env})
				ex.run(t, &exampleRun{gateway: g, dir: dir})
			})
			t.Run("check.sh", func(t *testing.T) {
				runCheckScript(t, src)
			})
		})
	}
}

// TestExamplesIndexed checks that every folder of examples/ has a
// scenario here, the files its README promises, and a row in the index.
func TestExamplesIndexed(t *testing.T) {
	root := filepath.Join(repoRoot, "examples")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range entries {
		if e.IsDir() {
			folders = append(folders, e.Name())
		}
	}
	var cases []string
	for _, ex := range exampleCases {
		cases = append(cases, ex.name)
	}
	slices.Sort(cases)
	if !slices.Equal(folders, cases) {
		t.Errorf("examples/ folders %v differ from the tested examples %v", folders, cases)
	}
	for _, name := range folders {
		for _, f := range []string{"turngate.yaml", "README.md", "check.sh", "rules"} {
			if _, err := os.Stat(filepath.Join(root, name, f)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if !bytes.Contains(index, []byte("("+name+"/)")) {
			t.Errorf("examples/README.md does not link %s/", name)
		}
	}
}

// runTurngate runs the built binary with args in dir and fails the test
// if it exits non-zero.
func runTurngate(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("turngate %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// runCheckScript runs the example's check.sh (on a copy of the folder)
// with the built binary, as an operator would, twice in a row.
func runCheckScript(t *testing.T, src string) {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("check.sh needs %s: %v", tool, err)
		}
	}
	// The copy keeps the repository's layout: lib.sh one level up, and a
	// module root (go.mod) two levels up for the Go programs an example
	// builds (its binary comes from $TURNGATE), with the packages of
	// the module they use (the tracing example's collector, the jwt-auth
	// example's identity provider, the approval-webhooks example's
	// receiver).
	root := t.TempDir()
	dir := filepath.Join(root, "examples", filepath.Base(src))
	copyDir(t, src, dir)
	for _, f := range []string{"go.mod", "go.sum", "examples/lib.sh", "internal/tracing/otlptest/receiver.go", "gateway/identity/idptest/idptest.go",
		"gateway/extension/sign.go"} {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	// Twice in the same folder, as a user reruns it: the second run finds
	// the first one's data/ (store, audit log) and must pass all the same.
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("bash", "check.sh")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TURNGATE="+binary)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS: ") {
			t.Fatalf("check.sh, run %d: %v\n%s\ngateway log:\n%s", run, err, out, readFileOrEmpty(filepath.Join(dir, "data", "gateway.log")))
		}
	}
}

func readFileOrEmpty(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// audit returns the records of the example's file audit sink
// (./data/audit.log) for session.
func (x *exampleRun) audit(session string) []map[string]any {
	f, err := os.Open(filepath.Join(x.dir, "data", "audit.log"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxSSELine)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["sessionId"] == session {
			out = append(out, rec)
		}
	}
	return out
}

// turnAudit waits until the audit log holds turns turn records of session
// and returns all of the session's records.
func (x *exampleRun) turnAudit(session string, turns int) []map[string]any {
	x.t.Helper()
	var recs []map[string]any
	poll(x.t, fmt.Sprintf("%d turn records of %s in the audit log", turns, session), func() error {
		recs = x.audit(session)
		n := 0
		for _, r := range recs {
			if r["kind"] == "turn" {
				n++
			}
		}
		if n < turns {
			return fmt.Errorf("%d turn records among %d", n, len(recs))
		}
		return nil
	})
	return recs
}

// decisions returns the matched decision records of hook among recs.
func decisions(recs []map[string]any, hook string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["hook"] == hook && r["outcome"] == "matched" {
			out = append(out, r)
		}
	}
	return out
}

// fired reports whether rec names rule in its rulesFired.
func fired(rec map[string]any, rule string) bool {
	list, _ := rec["rulesFired"].([]any)
	return slices.Contains(list, any(rule))
}

// clientToolOutput is the body useChat sends after a client tool ran: the
// user message and the assistant message with the call's output.
func clientToolOutput(session, userID, userText string, s *uiStream, call *toolCall, output any) chatBody {
	var input any
	_ = json.Unmarshal(call.Input, &input)
	return chatBody{
		"id":      session,
		"trigger": "submit-message",
		"messages": []map[string]any{
			{"id": userID, "role": "user", "parts": []map[string]any{{"type": "text", "text": userText}}},
			{"id": s.messageID(), "role": "assistant", "parts": []map[string]any{{
				"type": "tool-" + call.Name, "toolCallId": call.ID, "state": "output-available",
				"input": input, "output": output,
			}}},
		},
	}
}

// countTypes counts the stream's chunks of type typ.
func countTypes(s *uiStream, typ string) int {
	n := 0
	for _, c := range s.Chunks {
		if c.Type == typ {
			n++
		}
	}
	return n
}

// hasPrefixType reports whether any chunk's type starts with prefix.
func hasPrefixType(s *uiStream, prefix string) bool {
	return slices.ContainsFunc(s.types(), func(typ string) bool { return strings.HasPrefix(typ, prefix) })
}

// mustMatch fails unless re matches s.
func mustMatch(t *testing.T, what, s, re string) {
	t.Helper()
	if !regexp.MustCompile(re).MatchString(s) {
		t.Errorf("%s = %q, want a match for %q", what, s, re)
	}
}

// exampleContinuationTurns: the continuation after a client tool result
// runs on the fast model and streams no reasoning.
func exampleContinuationTurns(t *testing.T, x *exampleRun) {
	const session, text = "cont-1", "Book a table for 4"
	first := x.chat("concierge", userChat(session, "u1", text, nil))
	mustMatch(t, "user turn text", first.text(), `^\[big model\]`)
	if !hasPrefixType(first, "reasoning-") {
		t.Errorf("the user turn streams no reasoning:\n%s", first)
	}
	call, ok := first.toolCall("confirm")
	if !ok || call.State != "tool-input-available" || first.finishReason() != "tool-calls" {
		t.Fatalf("the user turn does not hand confirm to the client:\n%s", first)
	}

	second := x.chat("concierge", clientToolOutput(session, "u1", text, first, call, "yes"), call.ID)
	mustMatch(t, "continuation text", second.text(), `^\[fast model\] The user answered "yes"`)
	if hasPrefixType(second, "reasoning-") {
		t.Errorf("the continuation streams reasoning:\n%s", second)
	}
	if second.messageID() != first.messageID() {
		t.Errorf("the continuation streams message %q, want the continued %q", second.messageID(), first.messageID())
	}

	msgs := x.history("concierge", session)
	if len(msgs) != 2 || !strings.Contains(msgs[1].text(), "[fast model]") {
		t.Fatalf("history = %+v, want the user message and one assistant message ending with the fast model's answer", msgs)
	}

	recs := x.turnAudit(session, 2)
	got := decisions(recs, "beforeTurn")
	if len(got) != 1 {
		t.Fatalf("matched beforeTurn records = %v, want one (the continuation's)", got)
	}
	if d := mustJSON(t, got[0]["decision"]); d != `{"model":"fast","sendReasoning":false}` {
		t.Errorf("continuation decision = %s, want the fast model without reasoning", d)
	}
	for _, rule := range []string{"continuation.yaml#cheap-model-on-continuation", "continuation.yaml#hide-reasoning-on-continuation"} {
		if !fired(got[0], rule) {
			t.Errorf("rulesFired = %v, want %s", got[0]["rulesFired"], rule)
		}
	}
}

// exampleFileAttachments: a picture reaches the model and comes back
// intact from the history; a PDF is refused by the no-pdf rule before any
// model call (the stream's error chunk, the decision record); a zip is a
// 400 naming the part.
func exampleFileAttachments(t *testing.T, x *exampleRun) {
	const png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="
	withFile := func(id, text, mediaType, url, name string) chatBody {
		b := userChat(id, "u-"+id, text, nil)
		b["messages"].([]map[string]any)[0]["parts"] = []map[string]any{{"type": "text", "text": text},
			{"type": "file", "mediaType": mediaType, "url": url, "filename": name}}
		return b
	}
	s := x.chat("vision", withFile("img-1", "What is in this picture?", "image/png", png, "dot.png"))
	if s.text() != "I see your picture." {
		t.Errorf("the picture turn answered %q:\n%s", s.text(), s)
	}
	var h struct {
		Messages []json.RawMessage `json:"messages"`
	}
	x.json(http.MethodGet, "/v1/agents/vision/sessions/img-1/messages", nil, http.StatusOK, &h)
	if len(h.Messages) != 2 || !strings.Contains(string(h.Messages[0]), `{"type":"file","mediaType":"image/png","url":"`+png+`","filename":"dot.png"}`) {
		t.Errorf("history = %s", h.Messages)
	}

	s = x.chat("vision", withFile("pdf-1", "Summarise this document.", "application/pdf", "data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK", "report.pdf"))
	const reason = "PDF files are not accepted here; paste the relevant text instead."
	if e, ok := s.first("error"); !ok || e.Fields["errorText"] != reason || s.text() != "" || s.finishReason() != "error" {
		t.Errorf("the PDF turn was not refused:\n%s", s)
	}
	recs := decisions(x.turnAudit("pdf-1", 1), "beforeTurn")
	if len(recs) != 1 || mustJSON(t, recs[0]["rulesFired"]) != `["attachments.yaml#no-pdf"]` || mustJSON(t, recs[0]["decision"]) != `{"refuse":"`+reason+`"}` {
		t.Errorf("beforeTurn records = %v", recs)
	}

	var e struct{ Code, Pointer string }
	x.json(http.MethodPost, "/v1/agents/vision/chat", withFile("zip-1", "Unpack this.", "application/zip", "data:application/zip;base64,UEsFBg==", "a.zip"), http.StatusBadRequest, &e)
	if e.Code != "invalid_attachment" || e.Pointer != "/messages/0/parts/1" {
		t.Errorf("zip answered %+v", e)
	}
}

// exampleReadOnlyMode: delete is blocked in read-only mode, allowed
// otherwise.
func exampleReadOnlyMode(t *testing.T, x *exampleRun) {
	s := x.chat("files", userChat("ro-1", "u1", "delete notes.txt", map[string]any{"mode": "read-only"}))
	call, ok := s.toolCall("delete")
	if !ok || string(call.Output) != `"delete is disabled in read-only mode"` {
		t.Fatalf("delete is not answered with the block reason:\n%s", s)
	}
	if !strings.Contains(s.text(), "read-only mode") {
		t.Errorf("the answer %q does not relay the reason", s.text())
	}
	msgs := x.history("files", "ro-1")
	if len(msgs) != 2 || !strings.Contains(mustJSON(t, msgs[1]), "delete is disabled in read-only mode") {
		t.Errorf("stored answer = %+v, want the blocked call", msgs)
	}
	recs := decisions(x.turnAudit("ro-1", 1), "beforeToolCall")
	if len(recs) != 1 || mustJSON(t, recs[0]["decision"]) != `{"action":"block","reason":"delete is disabled in read-only mode"}` {
		t.Errorf("beforeToolCall records = %v, want one block", recs)
	}

	s = x.chat("files", userChat("rw-1", "u1", "delete notes.txt", nil))
	if call, ok := s.toolCall("delete"); !ok || string(call.Output) != `{"deleted":"notes.txt"}` {
		t.Errorf("without the mode delete does not run:\n%s", s)
	}
}

// exampleShadowRollout: the shadow /etc rule lets the delete run and
// records its would-be block; a replay of the recorded traffic against
// rules.next reports it as allow-to-block and exits 1 with --fail-on.
func exampleShadowRollout(t *testing.T, x *exampleRun) {
	s := x.chat("files", userChat("etc-1", "u1", "delete /etc/hosts", nil))
	if call, ok := s.toolCall("delete"); !ok || string(call.Output) != `{"deleted":"/etc/hosts"}` {
		t.Fatalf("the shadow rule must not block:\n%s", s)
	}
	var rec map[string]any
	for _, r := range x.turnAudit("etc-1", 1) {
		if r["hook"] == "beforeToolCall" {
			rec = r
		}
	}
	if got := mustJSON(t, rec["shadow"]); !strings.Contains(got, `"changed":true`) ||
		!strings.Contains(got, `"reason":"deleting /etc/hosts is not allowed"`) {
		t.Errorf("record shadow = %s, want the would-be block", got)
	}
	if rec["outcome"] != "no_match" || rec["input"] == nil {
		t.Errorf("record = %v, want an enforced no_match with its input", rec)
	}
	out, code := replayCmd(t, x.dir, "--audit", "data/audit.log", "--rules", "rules.next", "--fail-on", "allow-to-block")
	if code != 1 || !strings.Contains(out, "allow-to-block: 1\n") || !strings.Contains(out, "session etc-1") {
		t.Errorf("replay: exit %d\n%s", code, out)
	}
}

// exampleRestrictActiveTools: delete is never offered, getWeather is.
func exampleRestrictActiveTools(t *testing.T, x *exampleRun) {
	s := x.chat("assistant", userChat("del-1", "u1", "delete notes.txt", nil))
	if _, ok := s.toolCall("delete"); ok {
		t.Errorf("the model called delete, which the rule does not offer:\n%s", s)
	}
	if !strings.Contains(s.text(), `I would call the "delete" tool, but it is not offered`) {
		t.Errorf("text = %q, want the scripted model's note that delete is not offered", s.text())
	}
	recs := decisions(x.turnAudit("del-1", 1), "beforeTurn")
	if len(recs) != 1 || mustJSON(t, recs[0]["decision"]) != `{"activeTools":["read","write","getWeather"]}` {
		t.Errorf("beforeTurn records = %v, want the activeTools override", recs)
	}

	s = x.chat("assistant", userChat("wx-1", "u1", "What is the weather in Paris?", nil))
	if call, ok := s.toolCall("getWeather"); !ok || !strings.Contains(string(call.Output), `"city":"Paris"`) {
		t.Errorf("getWeather did not run:\n%s", s)
	}
}

// exampleSelectedFileContext: the selected file reaches the turn's system
// prompt (audit log, token usage) and the dry run.
func exampleSelectedFileContext(t *testing.T, x *exampleRun) {
	x.chat("coder", userChat("sel-1", "u1", "Why does this panic?", map[string]any{"selectedFile": "src/main.go"}))
	x.chat("coder", userChat("plain-1", "u1", "Why does this panic?", nil))
	sel, plain := x.turnAudit("sel-1", 1), x.turnAudit("plain-1", 1)

	recs := decisions(sel, "beforeTurn")
	want := map[string]any{"system": "You are a coding assistant.\n\nUser is editing: src/main.go"}
	if len(recs) != 1 || mustJSON(t, recs[0]["decision"]) != mustJSON(t, want) {
		t.Errorf("beforeTurn records = %v, want the system prompt with the selected file", recs)
	}
	if got := decisions(plain, "beforeTurn"); len(got) != 0 {
		t.Errorf("the rule fired without a selected file: %v", got)
	}
	if a, b := inputTokens(t, sel), inputTokens(t, plain); a <= b {
		t.Errorf("input tokens with the selected file = %v, without = %v; want more with it", a, b)
	}

	var res struct {
		Outcome string         `json:"outcome"`
		Result  map[string]any `json:"result"`
	}
	x.json(http.MethodPost, "/v1/admin/rules/eval", map[string]any{
		"hook":  "beforeTurn",
		"input": map[string]any{"turn": map[string]any{"system": "S.", "body": map[string]any{"selectedFile": "README.md"}}},
	}, http.StatusOK, &res)
	if res.Outcome != "matched" || res.Result["system"] != "S.\n\nUser is editing: README.md" {
		t.Errorf("dry run = %+v, want the new system prompt", res)
	}
}

// inputTokens returns the usage.inputTokens of the first turn record.
func inputTokens(t *testing.T, recs []map[string]any) float64 {
	t.Helper()
	for _, r := range recs {
		if r["kind"] == "turn" {
			u, _ := r["usage"].(map[string]any)
			n, _ := u["inputTokens"].(float64)
			return n
		}
	}
	t.Fatalf("no turn record among %v", recs)
	return 0
}

// exampleLongChatStepBudget: a short chat runs 6 steps, a chat of 101
// messages 3.
func exampleLongChatStepBudget(t *testing.T, x *exampleRun) {
	s := x.chat("researcher", userChat("short-1", "u1", "research turngate", nil))
	if n := len(s.toolCalls()); n != 6 || !strings.HasSuffix(s.text(), "Stopped after 6 steps (maxSteps).") {
		t.Errorf("short chat: %d searches, text %q; want 6 and the maxSteps note", n, s.text())
	}

	msgs := make([]map[string]any, 0, 101)
	for i := range 100 {
		msgs = append(msgs, map[string]any{"id": fmt.Sprint("m", i), "role": "user",
			"parts": []map[string]any{{"type": "text", "text": fmt.Sprint("note ", i)}}})
	}
	msgs = append(msgs, map[string]any{"id": "q", "role": "user",
		"parts": []map[string]any{{"type": "text", "text": "research turngate"}}})
	var res struct {
		Status  string    `json:"status"`
		Message uiMessage `json:"message"`
	}
	x.json(http.MethodPost, "/v1/agents/researcher/sessions/long-1/messages", map[string]any{"messages": msgs}, http.StatusOK, &res)
	searches := 0
	for _, p := range res.Message.Parts {
		if p.Type == "tool-search" {
			searches++
		}
	}
	if res.Status != "completed" || searches != 3 || !strings.HasSuffix(res.Message.text(), "Stopped after 3 steps (maxSteps).") {
		t.Errorf("long chat: status %s, %d searches, text %q; want 3 and the maxSteps note", res.Status, searches, res.Message.text())
	}
	recs := x.turnAudit("long-1", 1)
	if d := decisions(recs, "beforeTurn"); len(d) != 1 || mustJSON(t, d[0]["decision"]) != `{"maxSteps":3}` ||
		!fired(d[0], "step_budget.yaml#short-budget-for-long-chats") {
		t.Errorf("beforeTurn records = %v, want maxSteps 3 from short-budget-for-long-chats", d)
	}
}

// exampleStopOnFinalAnswer: the loop ends after the finalAnswer step.
func exampleStopOnFinalAnswer(t *testing.T, x *exampleRun) {
	s := x.chat("researcher", userChat("final-1", "u1", "question: what is turngate?", nil))
	calls := s.toolCalls()
	if len(calls) != 2 || calls[1].Name != "finalAnswer" || calls[1].State != "tool-output-available" {
		t.Fatalf("want a search then a finalAnswer call:\n%s", s)
	}
	if got := s.text(); strings.Contains(got, "EXTRA STEP") || got != `Stopped after 2 steps (stopWhen hasToolCall "finalAnswer").` {
		t.Errorf("text = %q, want only the stop note", got)
	}
	msgs := x.history("researcher", "final-1")
	if strings.Contains(mustJSON(t, msgs), "EXTRA STEP") {
		t.Errorf("the stored answer holds the extra step: %+v", msgs)
	}
	recs := decisions(x.turnAudit("final-1", 1), "beforeTurn")
	if len(recs) != 1 || mustJSON(t, recs[0]["decision"]) != `{"stopWhen":[{"toolName":"finalAnswer","type":"hasToolCall"}]}` {
		t.Errorf("beforeTurn records = %v, want the stop condition", recs)
	}
}

// lastTurnMessages returns the messages the last matched beforeTurn
// decision among recs sent the model, as JSON.
func lastTurnMessages(t *testing.T, recs []map[string]any) string {
	t.Helper()
	d := decisions(recs, "beforeTurn")
	if len(d) == 0 {
		t.Fatalf("no matched beforeTurn record among %v", recs)
	}
	dec, _ := d[len(d)-1]["decision"].(map[string]any)
	if dec["messages"] == nil {
		t.Fatalf("the last beforeTurn decision sets no messages: %v", dec)
	}
	return mustJSON(t, dec["messages"])
}

// examplePruneToolCalls: later turns' contexts lose old tool calls; the
// coder keeps its client tool's call and result.
func examplePruneToolCalls(t *testing.T, x *exampleRun) {
	x.chat("researcher", userChat("research-1", "u1", "search turngate", nil))
	x.chat("researcher", userChat("research-1", "u2", "thanks, what else?", nil))
	ctx := lastTurnMessages(t, x.turnAudit("research-1", 2))
	if !strings.Contains(ctx, `"search turngate"`) || strings.Contains(ctx, `"tool-call"`) || strings.Contains(ctx, `"tool-result"`) {
		t.Errorf("researcher's pruned context = %s, want the texts without tool calls or results", ctx)
	}
	if msgs := x.history("researcher", "research-1"); !strings.Contains(mustJSON(t, msgs), `"tool-search"`) {
		t.Errorf("the stored history lost the search call: %+v", msgs)
	}

	const session, pick = "coder-1", "pick a color for the theme"
	first := x.chat("coder", userChat(session, "u1", pick, nil))
	call, ok := first.toolCall("pick_color")
	if !ok {
		t.Fatalf("no pick_color call:\n%s", first)
	}
	x.chat("coder", clientToolOutput(session, "u1", pick, first, call, "blue"), call.ID)
	x.chat("coder", userChat(session, "u2", "search css themes", nil))
	x.chat("coder", userChat(session, "u3", "thanks, what else?", nil))
	ctx = lastTurnMessages(t, x.turnAudit(session, 4))
	if !strings.Contains(ctx, `"toolName":"pick_color","type":"tool-call"`) || !strings.Contains(ctx, `"output":"blue"`) {
		t.Errorf("coder's context = %s, want the pick_color call and its result", ctx)
	}
	if strings.Contains(ctx, `"toolName":"search"`) {
		t.Errorf("coder's context = %s, want the older search call pruned", ctx)
	}
}

// exampleRecoveryTurn: a normal turn outlasts the slow upstream; a
// recovering one fails on the chunk timeout.
func exampleRecoveryTurn(t *testing.T, x *exampleRun) {
	s := x.chat("assistant", userChat("normal-1", "u1", "hello", nil))
	if s.text() != "Here is your answer." || s.finishReason() != "stop" {
		t.Errorf("normal turn: text %q, finish %q; want the whole answer", s.text(), s.finishReason())
	}

	s = x.chat("assistant", userChat("recover-1", "u1", "hello again", map[string]any{"recovering": true}))
	e, ok := s.first("error")
	if !ok || e.str("errorText") != "model stream stalled: no chunk for 100ms (timeout.chunkMs)" || s.finishReason() != "error" {
		t.Errorf("recovering turn does not fail on the chunk timeout:\n%s", s)
	}
	recs := x.turnAudit("recover-1", 1)
	if d := decisions(recs, "beforeTurn"); len(d) != 1 ||
		mustJSON(t, d[0]["decision"]) != `{"maxRetries":0,"timeout":{"chunkMs":100,"totalMs":30000}}` {
		t.Errorf("beforeTurn records = %v, want no retries and the timeout", d)
	}
	for _, r := range recs {
		if r["kind"] == "turn" && r["status"] != "error" {
			t.Errorf("turn record = %v, want status error", r)
		}
	}
}

// exampleStructuredOutput: the flagged turn answers schema-shaped JSON
// without tools; other turns search and answer in prose.
func exampleStructuredOutput(t *testing.T, x *exampleRun) {
	const question = "assess: disk full on db-1"
	s := x.chat("triage", userChat("prose-1", "u1", question, nil))
	if _, ok := s.toolCall("search"); !ok || !strings.Contains(s.text(), "I would rate it high") {
		t.Errorf("a normal turn does not search and answer in prose:\n%s", s)
	}

	s = x.chat("triage", userChat("json-1", "u1", question, map[string]any{"mode": "structured-answer"}))
	if len(s.toolCalls()) != 0 || s.text() != `{"severity":"high"}` {
		t.Errorf("structured turn: %d tool calls, text %q; want none and the JSON answer", len(s.toolCalls()), s.text())
	}

	var res struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	x.json(http.MethodPost, "/v1/agents/triage/sessions/api-1/messages",
		map[string]any{"text": question, "body": map[string]any{"mode": "structured-answer"}}, http.StatusOK, &res)
	if res.Status != "completed" || string(res.Output) != `{"severity":"high"}` {
		t.Errorf("saveMessages = %+v, want the structured output", res)
	}
	d := decisions(x.turnAudit("api-1", 1), "beforeTurn")
	if len(d) != 1 || !strings.HasPrefix(mustJSON(t, d[0]["decision"]), `{"activeTools":[],"output":{"name":"result","schema":{`) {
		t.Errorf("beforeTurn records = %v, want no tools and the output schema", d)
	}
}

// stepDecision returns the beforeStep record of step n among recs.
func stepDecision(t *testing.T, recs []map[string]any, n int) map[string]any {
	t.Helper()
	for _, r := range recs {
		if r["hook"] == "beforeStep" && r["stepNumber"] == float64(n) {
			return r
		}
	}
	t.Fatalf("no beforeStep record of step %d among %v", n, recs)
	return nil
}

// exampleForceSearchFirstStep: step 0 must call search; step 1 is free.
func exampleForceSearchFirstStep(t *testing.T, x *exampleRun) {
	s := x.chat("assistant", userChat("news-1", "u1", "What's new in Go?", nil))
	calls := s.toolCalls()
	if len(calls) != 1 || calls[0].Name != "search" || calls[0].State != "tool-output-available" {
		t.Fatalf("want exactly one search call in step 0:\n%s", s)
	}
	if !strings.Contains(s.text(), "Based on the search results:") || countTypes(s, "start-step") != 2 {
		t.Errorf("text = %q over %d steps, want the answer from the results in step 1", s.text(), countTypes(s, "start-step"))
	}
	recs := x.turnAudit("news-1", 1)
	if d := stepDecision(t, recs, 0); mustJSON(t, d["decision"]) != `{"activeTools":["search"],"toolChoice":{"toolName":"search","type":"tool"}}` {
		t.Errorf("step 0 record = %v, want search forced", d)
	}
	if d := stepDecision(t, recs, 1); d["outcome"] != "no_match" {
		t.Errorf("step 1 record = %v, want no_match", d)
	}
}

// exampleFastModelAfterToolResults: step 0 on the big model, the summary
// on the fast one.
func exampleFastModelAfterToolResults(t *testing.T, x *exampleRun) {
	s := x.chat("assistant", userChat("wx-1", "u1", "What is the weather in Paris?", nil))
	mustMatch(t, "text", s.text(), `^\[big model\] Let me check the weather in Paris\.\[fast-summary model\] Summary: \{"city":"Paris"`)
	msgs := x.history("assistant", "wx-1")
	if len(msgs) != 2 || !strings.Contains(msgs[1].text(), "[fast-summary model]") || strings.Contains(msgs[1].text(), "[big model] Summary") {
		t.Errorf("stored answer = %+v, want the fast model's summary", msgs)
	}
	recs := x.turnAudit("wx-1", 1)
	if d := stepDecision(t, recs, 1); mustJSON(t, d["decision"]) != `{"model":"fast-summary"}` {
		t.Errorf("step 1 record = %v, want the fast-summary model", d)
	}
	if d := stepDecision(t, recs, 0); d["outcome"] != "no_match" {
		t.Errorf("step 0 record = %v, want no_match", d)
	}
}

// exampleTrimMessagesOnLaterSteps: step 2 sends the last 8 messages.
func exampleTrimMessagesOnLaterSteps(t *testing.T, x *exampleRun) {
	const session = "trim-1"
	var notes []map[string]any
	for i := 1; i <= 7; i++ {
		notes = append(notes, map[string]any{"id": fmt.Sprint("n", i), "role": "user",
			"parts": []map[string]any{{"type": "text", "text": fmt.Sprint("note ", i)}}})
	}
	x.json(http.MethodPost, "/v1/agents/researcher/sessions/"+session+"/messages", map[string]any{"messages": notes}, http.StatusOK, nil)
	s := x.chat("researcher", userChat(session, "u8", "research turngate", nil))
	if s.text() != "Done researching." || len(s.toolCalls()) != 2 {
		t.Fatalf("want two searches and the answer:\n%s", s)
	}
	recs := x.turnAudit(session, 2)
	for _, n := range []int{0, 1} {
		if d := stepDecision(t, recs, n); d["outcome"] != "no_match" {
			t.Errorf("step %d record = %v, want no_match", n, d)
		}
	}
	d := stepDecision(t, recs, 2)
	dec, _ := d["decision"].(map[string]any)
	msgs, _ := dec["messages"].([]any)
	if len(msgs) != 8 || !fired(d, "trim.yaml#trim-messages-on-later-steps") {
		t.Fatalf("step 2 record = %v, want 8 messages from the trim rule", d)
	}
	if first := mustJSON(t, msgs[0]); first != `{"content":[{"text":"note 6","type":"text"}],"role":"user"}` {
		t.Errorf("first message sent at step 2 = %s, want note 6", first)
	}
}

// toolDecisions returns the beforeToolCall records among recs, in order.
func toolDecisions(recs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["hook"] == "beforeToolCall" {
			out = append(out, r)
		}
	}
	return out
}

// turnRecord returns the first turn record among recs.
func turnRecord(t *testing.T, recs []map[string]any) map[string]any {
	t.Helper()
	for _, r := range recs {
		if r["kind"] == "turn" {
			return r
		}
	}
	t.Fatalf("no turn record among %v", recs)
	return nil
}

// exampleAuditEveryToolCall: each call has its beforeToolCall record and
// the turn record lists them all; the dry run shows the print line.
func exampleAuditEveryToolCall(t *testing.T, x *exampleRun) {
	s := x.chat("assistant", userChat("trip-1", "u1", "Plan a trip to Lisbon", nil))
	calls := s.toolCalls()
	if len(calls) != 2 {
		t.Fatalf("want a weather and a search call:\n%s", s)
	}
	recs := x.turnAudit("trip-1", 1)
	got := toolDecisions(recs)
	if len(got) != len(calls) {
		t.Fatalf("beforeToolCall records = %v, want one per call", got)
	}
	for i, c := range calls {
		r := got[i]
		if r["toolCallId"] != c.ID || r["toolName"] != c.Name || r["outcome"] != "no_match" || r["revision"] == "" {
			t.Errorf("record %d = %v, want call %s (%s) allowed, with the revision", i, r, c.ID, c.Name)
		}
	}
	tc, _ := turnRecord(t, recs)["toolCalls"].([]any)
	if len(tc) != 2 {
		t.Fatalf("turn record toolCalls = %v, want both calls", tc)
	}
	for i, c := range calls {
		rec, _ := tc[i].(map[string]any)
		if rec["toolCallId"] != c.ID || rec["decision"] != "allow" || mustJSON(t, rec["input"]) != string(c.Input) ||
			mustJSON(t, rec["output"]) != string(c.Output) {
			t.Errorf("turn record call %d = %v, want %s with the streamed input and output", i, rec, c.ID)
		}
	}

	var res struct {
		Prints []string `json:"prints"`
	}
	x.json(http.MethodPost, "/v1/admin/rules/eval", map[string]any{
		"hook": "beforeToolCall", "input": map[string]any{"toolName": "weather", "toolCallId": "c1", "input": map[string]any{"city": "Oslo"}},
	}, http.StatusOK, &res)
	if !slices.Contains(res.Prints, `Tool called: weather {"city": "Oslo"}`) {
		t.Errorf("dry run prints = %q, want the logged call", res.Prints)
	}
}

// exampleCachedWeather: a cached city is substituted, others run.
func exampleCachedWeather(t *testing.T, x *exampleRun) {
	s := x.chat("assistant", userChat("paris-1", "u1", "What is the weather in Paris?", nil))
	const cached = `{"cached":true,"celsius":24,"city":"Paris","forecast":"sunny"}`
	if call, ok := s.toolCall("weather"); !ok || string(call.Output) != cached {
		t.Fatalf("Paris is not answered from the cache:\n%s", s)
	}
	if !strings.Contains(s.text(), `"forecast":"sunny"`) {
		t.Errorf("the answer %q does not use the cached report", s.text())
	}
	recs := x.turnAudit("paris-1", 1)
	if d := toolDecisions(recs); len(d) != 1 || mustJSON(t, d[0]["decision"]) != `{"action":"substitute","output":`+cached+`}` {
		t.Errorf("beforeToolCall records = %v, want the substitute", d)
	}

	s = x.chat("assistant", userChat("lima-1", "u1", "What is the weather in Lima?", nil))
	if call, ok := s.toolCall("weather"); !ok || !strings.HasPrefix(string(call.Output), `{"city":"Lima","tempC":`) {
		t.Errorf("Lima does not run the tool:\n%s", s)
	}
}

// exampleClampSearchLimit: 500 becomes 50, a missing limit 10.
func exampleClampSearchLimit(t *testing.T, x *exampleRun) {
	s := x.chat("assistant", userChat("greedy-1", "u1", "search everything about turngate", nil))
	call, ok := s.toolCall("search")
	if !ok || string(call.Input) != `{"limit":500,"query":"turngate"}` || !strings.HasPrefix(string(call.Output), `{"limit":50,`) {
		t.Fatalf("want the model's limit 500 run as 50:\n%s", s)
	}
	msgs := x.history("assistant", "greedy-1")
	if !strings.Contains(mustJSON(t, msgs), `"output":{"limit":50,`) {
		t.Errorf("stored history = %+v, want the clamped call's output", msgs)
	}
	recs := x.turnAudit("greedy-1", 1)
	if d := toolDecisions(recs); len(d) != 1 || mustJSON(t, d[0]["decision"]) != `{"action":"allow","input":{"limit":50,"query":"turngate"}}` {
		t.Errorf("beforeToolCall records = %v, want the rewrite", d)
	}

	s = x.chat("assistant", userChat("quick-1", "u1", "quick search turngate", nil))
	if call, ok := s.toolCall("search"); !ok || !strings.HasPrefix(string(call.Output), `{"limit":10,`) {
		t.Errorf("a missing limit is not defaulted to 10:\n%s", s)
	}
}

// exampleRedactPIIInToolInput: the tracker receives the ticket with the
// e-mail address masked.
func exampleRedactPIIInToolInput(t *testing.T, x *exampleRun) {
	s := x.chat("support", userChat("pii-1", "u1", "ticket: The app crashes on start, reach me at jane.doe@example.com", nil))
	call, ok := s.toolCall("create_ticket")
	if !ok || !strings.Contains(string(call.Input), "jane.doe@example.com") {
		t.Fatalf("the model did not put the address in the ticket:\n%s", s)
	}
	const masked = `{"body":"The app crashes on start, reach me at [email redacted]","title":"Customer complaint"}`
	if string(call.Output) != masked {
		t.Errorf("the tracker received %s, want %s", call.Output, masked)
	}
	recs := x.turnAudit("pii-1", 1)
	if d := toolDecisions(recs); len(d) != 1 || mustJSON(t, d[0]["decision"]) != `{"action":"allow","input":`+masked+`}` {
		t.Errorf("beforeToolCall records = %v, want the masked input", d)
	}
	tc, _ := turnRecord(t, recs)["toolCalls"].([]any)
	if len(tc) != 1 || !strings.Contains(mustJSON(t, tc[0]), `"decision":"rewrite"`) {
		t.Errorf("turn record calls = %v, want one rewritten call", tc)
	}
}

// exampleTenantToolAllowlist: acme may search, globex may not, and
// globex's weather runs.
func exampleTenantToolAllowlist(t *testing.T, x *exampleRun) {
	acme, globex := x.as("acme-demo-c684be9cfe28208d032c12282d43a9ea"), x.as("globex-demo-2f22ae2f8e9a343fa5adaa206122698f")
	x.json(http.MethodGet, "/v1/agents/assistant/sessions/none/messages", nil, http.StatusUnauthorized, nil)

	s := acme.chat("assistant", userChat("acme-1", "u1", "search quarterly results", nil))
	if call, ok := s.toolCall("search"); !ok || !strings.HasPrefix(string(call.Output), `{"limit":1,`) {
		t.Errorf("acme's search did not run:\n%s", s)
	}
	s = globex.chat("assistant", userChat("globex-1", "u1", "search quarterly results", nil))
	if call, ok := s.toolCall("search"); !ok || string(call.Output) != `"tool \"search\" is not enabled for tenant \"globex\""` {
		t.Errorf("globex's search is not blocked:\n%s", s)
	}
	recs := x.turnAudit("globex-1", 1)
	if d := toolDecisions(recs); len(d) != 1 || d[0]["tenant"] != "globex" ||
		mustJSON(t, d[0]["decision"]) != `{"action":"block","reason":"tool \"search\" is not enabled for tenant \"globex\""}` {
		t.Errorf("beforeToolCall records = %v, want globex's block", d)
	}
	s = globex.chat("assistant", userChat("globex-2", "u1", "weather in Berlin", nil))
	if call, ok := s.toolCall("weather"); !ok || !strings.HasPrefix(string(call.Output), `{"city":"Berlin"`) {
		t.Errorf("globex's weather did not run:\n%s", s)
	}
}

// exampleToolCallQuota: of three searches in one step the third is
// blocked.
func exampleToolCallQuota(t *testing.T, x *exampleRun) {
	s := x.chat("analyst", userChat("quota-1", "u1", "compare phones, tablets and laptops", nil))
	calls := s.toolCalls()
	if len(calls) != 3 {
		t.Fatalf("want three search calls:\n%s", s)
	}
	for i, q := range []string{"phones", "tablets"} {
		if !strings.HasPrefix(string(calls[i].Output), `{"limit":1,"query":"`+q+`"`) {
			t.Errorf("search %d output = %s, want the %s results", i, calls[i].Output, q)
		}
	}
	if string(calls[2].Output) != `"search may run at most 2 times per turn"` {
		t.Errorf("third search output = %s, want the quota block", calls[2].Output)
	}
	if !strings.Contains(s.text(), "search quota") {
		t.Errorf("text = %q, want the partial answer", s.text())
	}
	d := toolDecisions(x.turnAudit("quota-1", 1))
	if len(d) != 3 || d[0]["outcome"] != "no_match" || d[1]["outcome"] != "no_match" || d[2]["toolCallId"] != calls[2].ID ||
		!strings.Contains(mustJSON(t, d[2]["decision"]), `"action":"block"`) {
		t.Errorf("beforeToolCall records = %v, want two allowed and the third blocked", d)
	}
}

// secretsPattern matches any of the stand-in service's secrets.
var secretsPattern = regexp.MustCompile(`hunter2|sk_live_|ghp_`)

// accountsService serves the example's backend/account.json, as the
// example's stand-in service does, and returns the environment that
// points get_account at it.
func accountsService(t *testing.T) []string {
	data, err := os.ReadFile(filepath.Join(repoRoot, "examples", "redact-secrets-in-tool-output", "backend", "account.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return []string{"ACCOUNTS_URL=" + srv.URL + "/"}
}

// exampleRedactSecretsInToolOutput: the model, the client, the history
// and the audit log see the account without its secrets.
func exampleRedactSecretsInToolOutput(t *testing.T, x *exampleRun) {
	s := x.chat("ops", userChat("acct-1", "u1", "show account acme-prod", nil))
	call, ok := s.toolCall("get_account")
	if !ok || call.State != "tool-output-available" {
		t.Fatalf("get_account did not run:\n%s", s)
	}
	var out struct {
		Account  string            `json:"account"`
		APIKey   string            `json:"api_key"`
		Database map[string]string `json:"database"`
		Notes    string            `json:"notes"`
	}
	if err := json.Unmarshal(call.Output, &out); err != nil {
		t.Fatal(err)
	}
	if out.Account != "acme-prod" || out.APIKey != "[REDACTED]" || out.Database["password"] != "[REDACTED]" ||
		out.Notes != "Rotate the deploy token [secret redacted] before Friday." {
		t.Errorf("output the model saw = %s, want the secrets redacted", call.Output)
	}
	if secretsPattern.MatchString(s.String()) {
		t.Errorf("a secret reached the stream:\n%s", s)
	}
	if h := mustJSON(t, x.history("ops", "acct-1")); secretsPattern.MatchString(h) {
		t.Errorf("a secret reached the stored history: %s", h)
	}
	recs := x.turnAudit("acct-1", 1)
	if h := mustJSON(t, recs); secretsPattern.MatchString(h) {
		t.Errorf("a secret reached the audit log: %s", h)
	}
	var res []map[string]any
	for _, r := range recs {
		if r["hook"] == "toolResult" {
			res = append(res, r)
		}
	}
	if len(res) != 1 || res[0]["outcome"] != "matched" || !fired(res[0], `data.turngate.tool_result.redact["/database/password"]`) {
		t.Errorf("toolResult records = %v, want the password redaction", res)
	}
}

// exampleRequireApproval: the chat user approves one delete and denies
// another by resending the message as the AI SDK client does; an ops
// approver decides a /prod/ delete through /v1/approvals, the chat user's
// own answer to it not counting, and the turn resumes on its own.
func exampleRequireApproval(t *testing.T, x *exampleRun) {
	user, ops := x.as("alice-e1426c705006c54eb62f9deef6b0589d"), x.as("olga-ops-2c6b5e607b556205fb44a6a71f157d46")
	ask := func(session, path string) (*uiStream, chunk) {
		s := user.chat("files", userChat(session, "u-"+session, "delete "+path, nil))
		req, ok := s.first("tool-approval-request")
		if !ok || s.finishReason() != "tool-calls" {
			t.Fatalf("no approval request:\n%s", s)
		}
		return s, req
	}
	answer := func(session string, s *uiStream, req chunk, approved bool, reason string) *uiStream {
		return user.chat("files", chatBody{"id": session, "trigger": "submit-message", "messageId": s.messageID(), "messages": []map[string]any{
			{"id": "u-" + session, "role": "user", "parts": []map[string]any{{"type": "text", "text": "delete"}}},
			{"id": s.messageID(), "role": "assistant", "parts": []map[string]any{{"type": "tool-delete", "toolCallId": req.str("toolCallId"),
				"state": "approval-responded", "input": map[string]any{}, "approval": map[string]any{"id": req.str("approvalId"), "approved": approved, "reason": reason}}}},
		}}, req.str("toolCallId"))
	}

	s, req := ask("ok-1", "notes.txt")
	if req.str("reason") != "deletes a file" {
		t.Errorf("reason %q", req.str("reason"))
	}
	out := answer("ok-1", s, req, true, "")
	if got := out.types(); len(got) < 3 || got[1] != "tool-output-available" || got[2] != "start-step" || !strings.Contains(out.text(), `{"deleted":"notes.txt"}`) {
		t.Errorf("approved continuation:\n%s", out)
	}
	s, req = ask("no-1", "photos.zip")
	out = answer("no-1", s, req, false, "keep it")
	if got := out.types(); len(got) < 2 || got[1] != "tool-output-denied" || !strings.Contains(out.text(), "not approved, so it did not run. Reason: keep it") {
		t.Errorf("denied continuation:\n%s", out)
	}

	s, req = ask("ops-1", "/prod/old.log")
	if out := answer("ops-1", s, req, true, "mine"); out.finishReason() != "interrupted" {
		t.Errorf("the chat user's answer to an ops approval ran:\n%s", out)
	}
	var list struct {
		Approvals []struct {
			ID    string          `json:"id"`
			Input json.RawMessage `json:"input"`
		} `json:"approvals"`
	}
	user.json(http.MethodGet, "/v1/approvals", nil, http.StatusOK, &list)
	if len(list.Approvals) != 0 {
		t.Errorf("the chat user lists %+v", list.Approvals)
	}
	ops.json(http.MethodGet, "/v1/approvals?state=pending", nil, http.StatusOK, &list)
	if len(list.Approvals) != 1 || list.Approvals[0].ID != req.str("approvalId") || string(list.Approvals[0].Input) != `{"path":"/prod/old.log"}` {
		t.Fatalf("ops lists %+v", list.Approvals)
	}
	ops.json(http.MethodPost, "/v1/approvals/"+req.str("approvalId"), map[string]any{"approved": true, "reason": "ticket 7"}, http.StatusOK, nil)
	ops.json(http.MethodPost, "/v1/approvals/"+req.str("approvalId"), map[string]any{"approved": false}, http.StatusConflict, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw := mustJSON(t, user.rawMessages("files", "ops-1"))
		if strings.Contains(raw, `"state":"output-available"`) && strings.Contains(raw, "The delete tool said") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approved turn did not resume: %s", raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
	found := false
	for _, rec := range x.audit("ops-1") {
		found = found || rec["kind"] == "approval" && rec["outcome"] == "approved" && rec["by"] == "olga"
	}
	if !found {
		t.Error("the audit log has no approval record by olga")
	}
}

// webhookSecret is the extension-webhook example's secret in the tests.
const webhookSecret = "examples-test-secret-0123456789"

// webhookStats is the running webhook's stats URL (set by
// webhookExtension, read by its scenario, in the same subtest).
var webhookStats string

// webhookExtension builds and starts the extension-webhook example's
// webhook program and returns the gateway's environment naming it.
func webhookExtension(t *testing.T) []string {
	bin := filepath.Join(t.TempDir(), "webhook")
	build := exec.Command("go", "build", "-o", bin, "./examples/extension-webhook/webhook")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the webhook: %v\n%s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-listen", addr)
	cmd.Env = append(os.Environ(), "WEBHOOK_SECRET="+webhookSecret)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHTTP(t, "http://"+addr+"/healthz")
	_, port, _ := strings.Cut(addr, ":")
	webhookStats = "http://" + addr + "/stats"
	return []string{"WEBHOOK_SECRET=" + webhookSecret, "WEBHOOK_PORT=" + port}
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	for range 500 {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not answer", url)
}

// exampleExtensionWebhook: the webhook's beforeTurn line reaches the
// model's system prompt, its request for 20 steps is held to the rules'
// 2, and it counts the turn's tool calls from verified deliveries.
func exampleExtensionWebhook(t *testing.T, x *exampleRun) {
	s := x.chat("echo", userChat("echo-1", "u1", "What are your instructions?", nil))
	if want := "My system prompt: You are a helpful assistant.\nAnswer in one short paragraph."; s.text() != want {
		t.Errorf("echo answered %q, want %q", s.text(), want)
	}
	s = x.chat("researcher", userChat("research-1", "u1", "research turngate", nil))
	if n := len(s.toolCalls()); n != 2 || !strings.HasSuffix(s.text(), "Stopped after 2 steps (maxSteps).") {
		t.Errorf("%d searches, text %q; want the rules' 2 steps", n, s.text())
	}
	var stats struct {
		Turns     int            `json:"turns"`
		ToolCalls map[string]int `json:"toolCalls"`
		Rejected  int            `json:"rejected"`
	}
	for range 500 {
		resp, err := client.Get(webhookStats)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&stats)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if stats.ToolCalls["search"] == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if stats.Turns != 2 || stats.ToolCalls["search"] != 2 || stats.Rejected != 0 {
		t.Errorf("webhook stats %+v, want 2 turns, 2 search calls, none rejected", stats)
	}
}

// exampleConsole: a blocked delete is found in the decision store by tool
// and action, with the key and with the console's session cookie; the
// cookie comes HttpOnly and SameSite=Strict.
func exampleConsole(t *testing.T, x *exampleRun) {
	const admin = "acme-admin-5d0c2f8e7b1a4c69a3e2d7f0b9c8e1a4"
	s := x.as("acme-alice-2e7d9c1b5a3f4e60b8d2c7a1f9e3b5d4").chat("files", userChat("etc-1", "u1", "delete /etc/passwd", nil))
	if !strings.Contains(s.String(), "no deletes under /etc") {
		t.Fatalf("the delete was not blocked:\n%s", s)
	}
	path := "/v1/admin/decisions?session=etc-1&tool=delete&action=block&hook=beforeToolCall"
	poll(t, "the blocked call in the decision store", func() error {
		var list struct {
			Decisions []struct {
				RulesFired []string `json:"rulesFired"`
			} `json:"decisions"`
		}
		x.as(admin).json("GET", path, nil, 200, &list)
		if len(list.Decisions) != 1 || len(list.Decisions[0].RulesFired) != 1 || !strings.Contains(list.Decisions[0].RulesFired[0], "no deletes under /etc") {
			return fmt.Errorf("decisions %+v", list.Decisions)
		}
		return nil
	})
	resp := x.do("POST", "/console/api/session", map[string]string{"key": admin})
	set := resp.Header.Get("Set-Cookie")
	if resp.StatusCode != 200 || !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Strict") {
		t.Fatalf("sign-in: %d, Set-Cookie %q", resp.StatusCode, set)
	}
	req, _ := http.NewRequest("GET", x.URL+path, nil)
	req.AddCookie(resp.Cookies()[0])
	got, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got.Body.Close()
	if got.StatusCode != 200 {
		t.Errorf("the decisions with the console's cookie: %d", got.StatusCode)
	}
}
