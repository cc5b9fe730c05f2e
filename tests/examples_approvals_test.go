package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/extension"
)

// buildExampleProgram builds the Go program of an example's folder
// (./examples/NAME/DIR) and returns the binary's path.
func buildExampleProgram(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, "./"+pkg)
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// exampleRetention: two of acme's sessions are stored; with the gateway
// stopped one is aged two hours (the example's age helper, as check.sh
// does), and the restarted gateway's first sweep erases it — 404, a
// tombstone of reason retention, counted, the audit chain still intact —
// and keeps the other.
func exampleRetention(t *testing.T, x *exampleRun) {
	const key = "alice-5c2e8f1a7b3d9e6c0a4f2b8d1e7c3a95"
	age := buildExampleProgram(t, "examples/retention/age")
	alice := x.as(key)
	for _, s := range []string{"idle", "fresh"} {
		if got := alice.chat("support", userChat(s, "u-"+s, "my order is late", nil)).text(); got != "Thanks, noted." {
			t.Fatalf("%s: the model said %q", s, got)
		}
	}
	x.Stop()
	cmd := exec.Command(age, "-db", filepath.Join(x.dir, "data", "turngate.db"), "-tenant", "acme", "-session", "idle", "-by", "2h")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("age: %v\n%s", err, out)
	}
	x.start()
	alice = x.as(key)
	poll(t, "the idle session erased", func() error {
		if code, _ := alice.getJSON("/v1/agents/support/sessions/idle/messages", nil); code != http.StatusNotFound {
			return fmt.Errorf("GET idle: %d", code)
		}
		return nil
	})
	alice.json(http.MethodGet, "/v1/agents/support/sessions/fresh/messages", nil, http.StatusOK, nil)
	// The tombstone follows the erasure's commit (the session is gone
	// first).
	var tombstone map[string]any
	poll(t, "the idle session's tombstone in the audit log", func() error {
		for _, rec := range x.audit("idle") {
			if rec["kind"] == "erasure" {
				tombstone = rec
				return nil
			}
		}
		return fmt.Errorf("no erasure record of idle")
	})
	if tombstone["reason"] != "retention" || tombstone["by"] != nil {
		t.Errorf("tombstone of idle: %v", tombstone)
	}
	for _, rec := range x.audit("fresh") {
		if rec["kind"] == "erasure" {
			t.Errorf("fresh was erased: %v", rec)
		}
	}
	poll(t, "the sweep counted", func() error {
		if line := x.metricLine("turngate_sessions_pruned_total", `agent="support"`); !strings.HasSuffix(line, " 1") {
			return fmt.Errorf("pruned counter: %q", line)
		}
		return nil
	})
	runTurngate(t, x.dir, "audit", "verify", filepath.Join("data", "audit.log"))
}

// approvalReceiverSecret is the approval-webhooks example's secret in the
// tests.
const approvalReceiverSecret = "examples-receiver-secret-0123456789"

// approvalEvents is the running receiver's GET /events URL (set by
// approvalReceiver).
var approvalEvents string

// approvalReceiver starts the approval-webhooks example's receiver and
// returns the gateway's environment naming it.
func approvalReceiver(t *testing.T) []string {
	bin := buildExampleProgram(t, "examples/approval-webhooks/receiver")
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-listen", addr)
	cmd.Env = append(os.Environ(), "RECEIVER_SECRET="+approvalReceiverSecret)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHTTP(t, "http://"+addr+"/healthz")
	_, port, _ := strings.Cut(addr, ":")
	approvalEvents = "http://" + addr + "/events"
	return []string{"RECEIVER_SECRET=" + approvalReceiverSecret, "RECEIVER_PORT=" + port}
}

// receivedEvent is an event as the receiver lists it.
type receivedEvent struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Approval struct {
		ID        string   `json:"id"`
		SessionID string   `json:"sessionId"`
		Approvers []string `json:"approvers"`
		State     string   `json:"state"`
		DecidedBy string   `json:"decidedBy"`
		Reason    string   `json:"reason"`
	} `json:"approval"`
}

// waitReceived polls the receiver until it kept an event of typ for the
// approval id, and returns it with the count of rejected deliveries.
func waitReceived(t *testing.T, typ, id string) (receivedEvent, int) {
	t.Helper()
	var got receivedEvent
	var rejected int
	poll(t, "the receiver to get "+typ, func() error {
		resp, err := client.Get(approvalEvents)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var list struct {
			Events   []receivedEvent `json:"events"`
			Rejected int             `json:"rejected"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
			return err
		}
		rejected = list.Rejected
		for _, ev := range list.Events {
			if ev.Type == typ && ev.Approval.ID == id {
				got = ev
				return nil
			}
		}
		return fmt.Errorf("not among %d events", len(list.Events))
	})
	return got, rejected
}

// exampleApprovalWebhooks: alice's production delete waits for ops, her
// stream says she cannot answer it, and the receiver verifies and keeps
// approval.requested (a forged delivery it rejects); her reconnected
// stream is held until olga approves, then carries the decision and the
// resumed turn, and the receiver gets approval.decided by olga.
func exampleApprovalWebhooks(t *testing.T, x *exampleRun) {
	alice, olga := x.as("alice-7d0b3c1e94f25a6e8b1c4d7f0a3e6b92"), x.as("olga-ops-4e8a1f6c3b9d2e7a5c0f8b1d4e7a2c96")
	s := alice.chat("files", userChat("prod", "u-prod", "delete /prod/db", nil))
	req, ok := s.first("tool-approval-request")
	if !ok || s.finishReason() != "tool-calls" {
		t.Fatalf("no approval request:\n%s", s)
	}
	id := req.str("approvalId")
	var desc struct {
		Approvers         []string `json:"approvers"`
		ChatUserMayAnswer bool     `json:"chatUserMayAnswer"`
		DecideAt          string   `json:"decideAt"`
	}
	if err := json.Unmarshal(req.rawField("approvalDescriptor"), &desc); err != nil || desc.ChatUserMayAnswer ||
		strings.Join(desc.Approvers, ",") != "role:ops" || desc.DecideAt != "POST /v1/approvals/"+id {
		t.Errorf("approvalDescriptor %s (%v)", req.rawField("approvalDescriptor"), err)
	}

	requested, rejected := waitReceived(t, "approval.requested", id)
	if requested.Approval.SessionID != "prod" || requested.Approval.State != "pending" || rejected != 0 {
		t.Errorf("requested event %+v, %d rejected", requested, rejected)
	}
	// The receiver checks the signature: a delivery signed with another
	// secret, or with none, is refused.
	body, _ := json.Marshal(map[string]any{"id": "evt_forged", "type": "approval.decided"})
	for _, sig := range []string{extension.Sign([]byte("another-secret-0123456789"), time.Now(), body), ""} {
		r, _ := http.NewRequest(http.MethodPost, approvalEvents, bytes.NewReader(body))
		r.Header.Set(extension.SignatureHeader, sig)
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("a forged delivery (%q) got %d, want 401", sig, resp.StatusCode)
		}
	}

	resp := alice.do(http.MethodGet, "/v1/agents/files/chat/prod/stream", nil)
	checkStreamResponse(t, resp)
	held := newUIStreamReader(resp.Body)
	if _, err := held.until("tool-approval-request"); err != nil {
		t.Fatal(err)
	}
	olga.json(http.MethodPost, "/v1/approvals/"+id, map[string]any{"approved": true, "reason": "ticket 7"}, http.StatusOK, nil)
	out, err := held.finish()
	resp.Body.Close()
	if err != nil {
		t.Fatalf("held stream: %v\n%s", err, out)
	}
	resp2, ok := out.first("tool-approval-response")
	call, _ := out.toolCall("delete")
	if !ok || resp2.str("approvalId") != id || resp2.Fields["approved"] != true || out.messageID() != s.messageID() ||
		call == nil || !strings.Contains(out.text(), `The delete tool said: {"deleted":"/prod/db"}`) || out.finishReason() != "stop" {
		t.Errorf("held stream after the approval:\n%s", out)
	}

	decided, rejected := waitReceived(t, "approval.decided", id)
	if decided.Approval.State != "approved" || decided.Approval.DecidedBy != "olga" || decided.Approval.Reason != "ticket 7" || rejected != 2 {
		t.Errorf("decided event %+v, %d rejected (want the 2 forged)", decided, rejected)
	}
}
