package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/erasure"
	"github.com/turngate/turngate/internal/syncbuf"
)

// card is the card number the redaction tests send; stored, it is masked.
const (
	card       = "4111 1111 1111 1234"
	cardMasked = "[card]"
)

// TestBeforePersistMasksStoredMessages sends a card number on every entry
// path that stores messages and checks what a user notices: the model of
// the running turn saw the number (the fake upstream's request holds it),
// the stored session (GET …/messages) holds only the mask, and the
// decision record says what was masked without holding the number either.
func TestBeforePersistMasksStoredMessages(t *testing.T) {
	up := newFakeOpenAI(t)
	g := newTestGateway(t, "persist", withUpstream(up, "k", config.Agent{Name: "vault", Model: "up"}))
	text := "charge my card " + card + " today"
	paths := []struct {
		name string
		send func(session string)
	}{
		{"ui stream", func(session string) {
			readUIStream(t, g.do("POST", "/v1/agents/vault/chat", chatBody(session, "u1", text)))
		}},
		{"saveMessages", func(session string) {
			g.doJSON("POST", "/v1/agents/vault/sessions/"+session+"/messages", map[string]any{"text": text}, http.StatusOK, nil)
		}},
		{"durable submission", func(session string) {
			var sub submissionResponse
			g.doJSON("POST", "/v1/agents/vault/sessions/"+session+"/messages", map[string]any{"text": text, "async": true}, http.StatusAccepted, &sub)
			waitSubmission(t, g, "vault", session, sub.SubmissionID)
		}},
		{"websocket", func(session string) {
			ws := g.dialWS(t, "vault", nil)
			ws.turn("r1", sendFrame("r1", session, "u1", text, nil))
		}},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			session := "s-" + strings.ReplaceAll(p.name, " ", "-")
			p.send(session)
			sent, _ := up.last(t)
			if b, _ := json.Marshal(sent["messages"]); !strings.Contains(string(b), card) {
				t.Errorf("the model saw %s, want the card number as sent", b)
			}
			msgs := g.history("vault", session)
			if len(msgs) != 2 {
				t.Fatalf("stored %d messages, want the user's and the answer", len(msgs))
			}
			if got := msgs[0].Parts[0].Text; got != "charge my card "+cardMasked+" today" {
				t.Errorf("stored user message %q, want the card masked", got)
			}
			if msgs[1].Parts[len(msgs[1].Parts)-1].Text != fakeAnswer {
				t.Errorf("stored answer %+v, want it unchanged", msgs[1].Parts)
			}
			// Nothing stored for the session holds the number: a durable
			// submission's stored request is masked once its turn stored
			// the message.
			var doc erasure.Document
			g.doJSON("GET", "/v1/agents/vault/sessions/"+session+"/export", nil, http.StatusOK, &doc)
			b, _ := json.Marshal(doc)
			if strings.Contains(string(b), "1111 1234") {
				t.Errorf("the session's export holds the card number: %s", b)
			}
			for _, sub := range doc.Submissions {
				if !strings.Contains(string(sub.Request), cardMasked) {
					t.Errorf("stored submission request %s, want the masked message", sub.Request)
				}
			}
		})
	}
	// The next turn's model sees the session as stored: masked.
	g.doJSON("POST", "/v1/agents/vault/sessions/s-saveMessages/messages", map[string]any{"text": "and again?"}, http.StatusOK, nil)
	sent, _ := up.last(t)
	if b, _ := json.Marshal(sent["messages"]); strings.Contains(string(b), card) || !strings.Contains(string(b), cardMasked) {
		t.Errorf("the next turn's model saw %s, want the stored, masked history", b)
	}
	records := decisionRecords(t, g, "beforePersist")
	if len(records) == 0 {
		t.Fatal("no beforePersist decision records")
	}
	masked := 0
	for _, r := range records {
		if strings.Contains(string(r.raw), "1111 1234") {
			t.Errorf("a decision record holds the card number: %s", r.raw)
		}
		if r.Decision.Masked > 0 {
			masked++
		}
	}
	if masked != len(paths) {
		t.Errorf("%d beforePersist records masked something, want one per user message (%d)", masked, len(paths))
	}
}

// TestBeforePersistMasksToolResults runs a tool whose input and output hold
// a card number: the client of the running turn sees them as they were,
// the stored tool part has them masked.
func TestBeforePersistMasksToolResults(t *testing.T) {
	g := newTestGateway(t, "persist")
	chunks := readUIStream(t, g.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "weather in "+card)))
	var live string
	for _, c := range chunks {
		if c.str("type") == "tool-output-available" {
			b, _ := json.Marshal(c["output"])
			live = string(b)
		}
	}
	if !strings.Contains(live, card) {
		t.Errorf("the running turn's tool output %s, want the card number", live)
	}
	msgs := g.history("demo", "s1")
	var tool *engine.UIPart
	for i, p := range msgs[len(msgs)-1].Parts {
		if p.IsTool() {
			tool = &msgs[len(msgs)-1].Parts[i]
		}
	}
	if tool == nil {
		t.Fatalf("no stored tool part in %+v", msgs)
	}
	for name, raw := range map[string]json.RawMessage{"input": tool.Input, "output": tool.Output} {
		if strings.Contains(string(raw), "1111") || !strings.Contains(string(raw), cardMasked) {
			t.Errorf("stored tool %s %s, want the card masked", name, raw)
		}
	}
}

// TestBeforePersistFailsClosed: a rule that fails on a message stores
// nothing of it, whatever the failure policy; the client gets a 500
// persist_rules_failed, and the record of the failure holds no input.
func TestBeforePersistFailsClosed(t *testing.T) {
	g := newTestGateway(t, "persist", func(c *config.Config) { c.Rules.FailOpen = true })
	var e struct{ Code, Message string }
	g.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "explode " + card}, http.StatusInternalServerError, &e)
	if e.Code != CodePersistRulesFailed {
		t.Errorf("error %+v, want %s", e, CodePersistRulesFailed)
	}
	g.doJSON("GET", "/v1/agents/demo/sessions/s1/messages", nil, http.StatusNotFound, nil)
	var failed []decisionRecord
	for _, r := range decisionRecords(t, g, "beforePersist") {
		if r.Outcome == "error" {
			failed = append(failed, r)
			if len(r.Input) != 0 {
				t.Errorf("the failed evaluation's record holds its input %s", r.Input)
			}
		}
	}
	if len(failed) != 1 {
		t.Errorf("%d beforePersist error records, want 1", len(failed))
	}
	// A durable submission of such a message fails, and its stored
	// request keeps nothing of the message.
	var sub submissionResponse
	g.doJSON("POST", "/v1/agents/demo/sessions/s2/messages", map[string]any{"text": "explode " + card, "async": true}, http.StatusAccepted, &sub)
	if got := waitSubmission(t, g, "demo", "s2", sub.SubmissionID); got.Status != "error" {
		t.Errorf("the submission ended %s, want error", got.Status)
	}
	var doc erasure.Document
	g.doJSON("GET", "/v1/agents/demo/sessions/s2/export", nil, http.StatusOK, &doc)
	if b, _ := json.Marshal(doc); len(doc.Submissions) != 1 || strings.Contains(string(b), "1111 1234") {
		t.Errorf("the export after the failed submission holds the card number: %s", b)
	}
}

// decisionRecord is one decision line of the audit log, and the line.
type decisionRecord struct {
	Outcome  string          `json:"outcome"`
	Input    json.RawMessage `json:"input"`
	Decision struct {
		Masked int `json:"masked"`
	} `json:"decision"`
	raw []byte
}

// decisionRecords returns the audit log's decision records of hook.
func decisionRecords(t *testing.T, g *testGateway, hook string) []decisionRecord {
	t.Helper()
	g.srv.audit.Flush()
	var out []decisionRecord
	for _, line := range strings.Split(g.auditLog(), "\n") {
		var head struct{ Kind, Hook string }
		if json.Unmarshal([]byte(line), &head) != nil || head.Kind != audit.KindDecision || head.Hook != hook {
			continue
		}
		r := decisionRecord{raw: []byte(line)}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// TestBeforePersistWarnsOfRecordedInputs: with beforePersist rules and
// decision records carrying their inputs, the first turn of the revision
// logs a warning (once) that the other hooks' records hold the unmasked
// input; with audit.recordInput off, or without beforePersist rules,
// nothing is logged.
func TestBeforePersistWarnsOfRecordedInputs(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name, rules string
		audit       config.Audit
		want        int
	}{
		{"inputs recorded", "persist", config.Audit{Sink: config.SinkStdout}, 1},
		{"recordInput off", "persist", config.Audit{Sink: config.SinkStdout, RecordInput: &off}, 0},
		{"audit off", "persist", config.Audit{Sink: config.SinkNone}, 0},
		{"no beforePersist rules", "basic", config.Audit{Sink: config.SinkStdout}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, tc.rules)
			cfg.Audit = tc.audit
			var logs syncbuf.Buffer
			g := startGateway(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			for _, s := range []string{"s1", "s2"} {
				g.doJSON("POST", "/v1/agents/demo/sessions/"+s+"/messages", map[string]any{"text": "hi"}, http.StatusOK, nil)
			}
			if n := strings.Count(logs.String(), "hold the running turn's input unmasked"); n != tc.want {
				t.Errorf("the warning was logged %d times, want %d:\n%s", n, tc.want, logs.String())
			}
		})
	}
}
