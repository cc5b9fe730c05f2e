package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
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

// heldReader reads a GET …/chat/{id}/stream response as it arrives.
type heldReader struct {
	t      *testing.T
	status int
	cancel context.CancelFunc
	mu     sync.Mutex
	chunks []chunk
	alive  int  // keep-alive comments
	done   bool // [DONE] came
	ended  chan struct{}
}

// openStream starts GET …/chat/{session}/stream and reads it in the
// background until it ends or the test cancels it.
func openStream(t *testing.T, g *testGateway, session string, headers ...string) *heldReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", g.http.URL+"/v1/agents/demo/chat/"+session+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := &heldReader{t: t, status: resp.StatusCode, cancel: cancel, ended: make(chan struct{})}
	go func() {
		defer close(r.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			r.mu.Lock()
			switch data, ok := strings.CutPrefix(line, "data: "); {
			case line == ": keep-alive":
				r.alive++
			case ok && data == "[DONE]":
				r.done = true
			case ok:
				var c chunk
				if err := json.Unmarshal([]byte(data), &c); err != nil {
					t.Errorf("chunk %s: %v", data, err)
				}
				r.chunks = append(r.chunks, c)
			}
			r.mu.Unlock()
		}
	}()
	return r
}

// waitFor polls until ok holds of the chunks so far and the keep-alive
// count, failing after a generous deadline.
func (r *heldReader) waitFor(what string, ok func(chunks []chunk, alive int, done bool) bool) []chunk {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r.mu.Lock()
		chunks, alive, done := slices.Clone(r.chunks), r.alive, r.done
		r.mu.Unlock()
		if ok(chunks, alive, done) {
			return chunks
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("stream never showed %s: %d keep-alives, done %v, %q", what, alive, done, types(chunks))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// withKeepAlive makes held streams send keep-alives every few milliseconds.
func withKeepAlive(c *config.Config) { c.Limits.StreamKeepAlive = 20 * time.Millisecond }

// descriptor decodes a tool-approval-request chunk's approvalDescriptor.
func descriptor(t *testing.T, c chunk) approvalDescriptor {
	t.Helper()
	var d approvalDescriptor
	raw, _ := json.Marshal(c["approvalDescriptor"])
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("descriptor of %v: %v", c, err)
	}
	return d
}

// A chat client that reconnects while its turn waits for an approver is
// kept open: the waiting message, the role-gated request described as
// one the chat user cannot answer, keep-alives while it waits (the chat
// user's own answer is refused with an error chunk meanwhile), then the
// decision and the resumed turn, to its finish.
func TestHeldStreamResumes(t *testing.T) {
	for _, tt := range []struct {
		name       string
		approved   bool
		wantOutput string
		wantText   string
	}{
		{"approved", true, "tool-output-available", `The delete tool returned: {"deleted":"/big/db"}`},
		{"denied", false, "tool-output-denied", "The delete tool failed: " + engine.ApprovalDeniedText + " Reason: no"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGateway(t, "approval", withApprovalKeys, withKeepAlive)
			session := "held-" + tt.name
			chunks, m := askApproval(t, g, session, "/big/db", bearer(userKey)...)
			asked := chunks[slices.Index(types(chunks), "tool-approval-request")]
			id := asked.str("approvalId")
			if d := descriptor(t, asked); d.ChatUserMayAnswer || !slices.Equal(d.Approvers, []string{"role:ops"}) || d.DecideAt != "POST /v1/approvals/"+id {
				t.Errorf("the live request's descriptor %+v", d)
			}

			r := openStream(t, g, session, bearer(userKey)...)
			if r.status != http.StatusOK {
				t.Fatalf("held stream status %d, want 200", r.status)
			}
			held := r.waitFor("the waiting message and keep-alives", func(c []chunk, alive int, _ bool) bool {
				return slices.Contains(types(c), "tool-approval-request") && alive >= 2
			})
			want := []string{"start", "start-step", "text-start", "text-delta", "text-end", "tool-input-available", "tool-approval-request", "finish-step"}
			if got := types(held); !slices.Equal(got, want) || held[0].str("messageId") != m.ID || streamedText(held) != "Deleting /big/db." {
				t.Fatalf("held stream replayed %q (%v), want the waiting message %s", got, held, m.ID)
			}
			req := held[6]
			if d := descriptor(t, req); req.str("approvalId") != id || req.str("reason") != "deletes a big file" || d.ChatUserMayAnswer ||
				!strings.Contains(d.Why, "holds none of the approver roles role:ops") {
				t.Errorf("held approval request %v, descriptor %+v", req, d)
			}

			// The chat user's answer is ignored, and told so; the held stream stays open.
			resp := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", answerBody(session, m, id, true, "me"), bearer(userKey)...))
			if got := types(resp); !slices.Equal(got, []string{"start", "error", "finish"}) ||
				!strings.HasPrefix(resp[1].str("errorText"), "approval answer ignored: the principal holds none of the approver roles") {
				t.Errorf("the chat user's answer got %v, want an error chunk", resp)
			}
			r.mu.Lock()
			alive := r.alive
			r.mu.Unlock()
			r.waitFor("more keep-alives", func(c []chunk, n int, done bool) bool { return n > alive && !done && len(c) == len(held) })

			g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": tt.approved, "reason": map[bool]string{true: "ticket 7", false: "no"}[tt.approved]},
				http.StatusOK, nil, bearer(opsKey)...)
			all := r.waitFor("the resumed turn", func(_ []chunk, _ int, done bool) bool { return done })
			checkUIStream(t, all)
			rest := all[len(held):]
			got := types(rest)
			if len(got) < 3 || got[0] != "tool-approval-response" || got[1] != tt.wantOutput || got[2] != "start-step" || got[len(got)-1] != "finish" {
				t.Fatalf("after the decision %q", got)
			}
			if rest[0].str("approvalId") != id || rest[0]["approved"] != tt.approved || rest[len(rest)-1].str("finishReason") != "stop" {
				t.Errorf("decision %v, finish %v", rest[0], rest[len(rest)-1])
			}
			if text := streamedText(rest); text != tt.wantText {
				t.Errorf("the resumed turn said %q, want %q", text, tt.wantText)
			}
			h := historyAs(t, g, session, bearer(userKey)...)
			if last := h[len(h)-1]; last.ID != m.ID || last.Parts[len(last.Parts)-1].Text != tt.wantText {
				t.Errorf("stored %+v", last)
			}
		})
	}
}

// streamedText is the text of the chunks' text-delta chunks.
func streamedText(chunks []chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		if c.str("type") == "text-delta" {
			b.WriteString(c.str("delta"))
		}
	}
	return b.String()
}

// An expiry decides the held call too: the stream shows it denied and
// the model's answer. A session that waits for nothing still answers 204.
func TestHeldStreamExpires(t *testing.T) {
	g := newTestGateway(t, "approval", withKeepAlive, func(c *config.Config) { c.Limits.ApprovalExpiry = 300 * time.Millisecond })
	_, m := askApproval(t, g, "expiring", "/tmp/x")
	r := openStream(t, g, "expiring")
	all := r.waitFor("the expiry", func(_ []chunk, _ int, done bool) bool { return done })
	checkUIStream(t, all)
	i := slices.Index(types(all), "tool-approval-response")
	if i < 0 || all[i]["approved"] != false || all[i].str("reason") != "expired" || all[i+1].str("type") != "tool-output-denied" || all[0].str("messageId") != m.ID {
		t.Fatalf("expired stream %v", all)
	}
	if text := streamedText(all[i:]); !strings.HasPrefix(text, "The delete tool failed: "+engine.ApprovalDeniedText) {
		t.Errorf("the resumed turn said %q", text)
	}
	resp := g.do("GET", "/v1/agents/demo/chat/expiring/stream", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("a session that waits for nothing: %d, want 204", resp.StatusCode)
	}
}

// A client that leaves a held stream leaves nothing behind: its watch is
// gone, the stream gauge is back, and the approval still resumes the turn.
func TestHeldStreamClientLeaves(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys, withKeepAlive)
	chunks, _ := askApproval(t, g, "leaving", "/big/db", bearer(userKey)...)
	id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	for range 3 {
		r := openStream(t, g, "leaving", bearer(userKey)...)
		r.waitFor("keep-alives", func(_ []chunk, alive int, _ bool) bool { return alive >= 1 })
		r.cancel()
		<-r.ended
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		g.srv.mu.Lock()
		watching := len(g.srv.started)
		g.srv.mu.Unlock()
		if watching == 0 && strings.Contains(g.metricsText(), "turngate_active_streams 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("held streams still registered: %d watches; %s", watching, grepLines(g.metricsText(), "active_streams"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	g.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusOK, nil, bearer(opsKey)...)
	waitForPart(t, g, "leaving", engine.ToolStateOutputAvailable, bearer(userKey)...)
}

// With replicas on one PostgreSQL store a stream held on either replica
// resumes, whichever replica's submission worker runs the resumed turn:
// the other relays it (or, when it ended before the relay began, replays
// what it added from the store).
func TestHeldStreamOnTwoReplicas(t *testing.T) {
	withApprovals := func(c *config.Config) {
		c.Rules.Dir = filepath.Join("testdata", "rules", "approval")
		withApprovalKeys(c)
		withKeepAlive(c)
	}
	a, b := twoReplicas(t, [2]engine.Hooks{nil, nil}, withApprovals)
	chunks, m := askApproval(t, a, "replicas", "/big/db", bearer(userKey)...)
	id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	readers := []*heldReader{openStream(t, a, "replicas", bearer(userKey)...), openStream(t, b, "replicas", bearer(userKey)...)}
	for _, r := range readers {
		if r.status != http.StatusOK {
			t.Fatalf("held stream status %d", r.status)
		}
		r.waitFor("the approval request", func(c []chunk, alive int, _ bool) bool {
			return slices.Contains(types(c), "tool-approval-request") && alive >= 1
		})
	}
	a.doJSON("POST", "/v1/approvals/"+id, map[string]any{"approved": true}, http.StatusOK, nil, bearer(opsKey)...)
	want := `The delete tool returned: {"deleted":"/big/db"}`
	for i, r := range readers {
		all := r.waitFor("the resumed turn", func(_ []chunk, _ int, done bool) bool { return done })
		checkUIStream(t, all)
		got := types(all)
		j := slices.Index(got, "tool-approval-response")
		if j < 0 || got[j+1] != "tool-output-available" || all[0].str("messageId") != m.ID || streamedText(all[j:]) != want ||
			all[len(all)-1].str("finishReason") != "stop" {
			t.Errorf("replica %d's held stream %q: %q", i, got, streamedText(all))
		}
	}
	ran := "replica-a"
	if strings.Contains(b.auditLog(), `"kind":"turn"`) {
		ran = "replica-b"
	}
	t.Logf("the resumed turn ran on %s", ran)
}

// A resumed turn that ended before a held stream could follow it is
// replayed from the store: the chunks of what it added to the message
// are those its live stream sent (text deltas merged), for an approval
// and a denial.
func TestHeldStreamReplaysWhatTheTurnAdded(t *testing.T) {
	g := newTestGateway(t, "approval")
	for _, approved := range []bool{true, false} {
		session := "added-" + strconv.FormatBool(approved)
		chunks, m := askApproval(t, g, session, "/tmp/a")
		id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
		live := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", answerBody(session, m, id, approved, "")))
		h := g.history("demo", session)
		held := &heldStream{sent: m}
		var replayed []chunk
		for _, ev := range append(held.added(h[len(h)-1], nil), engine.Event{Type: engine.EventFinishStep}, engine.Event{Type: engine.EventFinish, FinishReason: "stop"}) {
			raw, _ := json.Marshal(ev)
			var c chunk
			_ = json.Unmarshal(raw, &c)
			replayed = append(replayed, c)
		}
		if got, want := slices.Compact(types(replayed)), slices.Compact(types(live[1:])); !slices.Equal(got, want) || streamedText(replayed) != streamedText(live) {
			t.Errorf("approved %v: replayed %q %q, live %q %q", approved, got, streamedText(replayed), want, streamedText(live))
		}
	}
}

// GET /v1/approvals/{id} shows an approver one approval with the input
// that would run (what a webhook's receiver reads: its events carry no
// input); the chat user may not read a role approval, another tenant
// finds none.
func TestGetApproval(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys)
	chunks, m := askApproval(t, g, "get", "/big/db", bearer(userKey)...)
	id := chunks[slices.Index(types(chunks), "tool-approval-request")].str("approvalId")
	var a approvalResponse
	g.doJSON("GET", "/v1/approvals/"+id, nil, http.StatusOK, &a, bearer(opsKey)...)
	if a.ID != id || a.MessageID != m.ID || a.State != "pending" || string(a.Input) != `{"path":"/big/db"}` || !slices.Equal(a.Approvers, []string{"role:ops"}) {
		t.Errorf("GET approval %+v", a)
	}
	g.doJSON("GET", "/v1/approvals/"+id, nil, http.StatusForbidden, nil, bearer(userKey)...)
	g.doJSON("GET", "/v1/approvals/"+id, nil, http.StatusNotFound, nil, bearer(otherKey)...)
	g.doJSON("GET", "/v1/approvals/appr_none", nil, http.StatusNotFound, nil, bearer(opsKey)...)
	g.doJSON("GET", "/v1/approvals/bad%20id", nil, http.StatusNotFound, nil, bearer(opsKey)...)
}

// A gateway shutting down ends its held streams with finish
// "interrupted" (the client resubmits nothing and reconnects to another
// gateway); the approval stays pending.
func TestHeldStreamEndsOnShutdown(t *testing.T) {
	g := newTestGateway(t, "approval", withApprovalKeys, withKeepAlive)
	askApproval(t, g, "stopping", "/big/db", bearer(userKey)...)
	r := openStream(t, g, "stopping", bearer(userKey)...)
	r.waitFor("the approval request", func(c []chunk, _ int, _ bool) bool { return slices.Contains(types(c), "tool-approval-request") })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st := g.store
	g.store = nopCloseStore{st}
	if err := g.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all := r.waitFor("the end", func(_ []chunk, _ int, done bool) bool { return done })
	checkUIStream(t, all)
	if last := all[len(all)-1]; last.str("type") != "finish" || last.str("finishReason") != "interrupted" || slices.Contains(types(all), "tool-approval-response") {
		t.Errorf("held stream at shutdown ended %q", types(all))
	}
	list, err := st.ListApprovals(context.Background(), "acme", store.ApprovalFilter{SessionID: "stopping"})
	if err != nil || len(list) != 1 || list[0].State != store.ApprovalPending {
		t.Errorf("approvals after the shutdown %+v, %v", list, err)
	}
}

// nopCloseStore keeps a store open past the gateway's shutdown, for a
// test to read it after.
type nopCloseStore struct{ store.Store }

func (nopCloseStore) Close() error { return nil }
