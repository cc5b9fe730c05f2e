package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/config"
)

// everyHookRules has rules for every hook: the CEL hooks fire on every
// evaluation, tool_call allows, and tool_result fails (1 / 0 is an error)
// so that the call's failure reaches onChatError.
var everyHookRules = map[string]string{
	"turn.yaml": `beforeTurn:
  - name: always
    set: {maxSteps: '4'}
beforeStep:
  - name: always
    set: {toolChoice: '"auto"'}
beforePersist:
  - name: cards
    set: {redact: '["\\d{16}"]'}
onChatError:
  - name: always
    set: {message: '"failed: " + error.class'}
`,
	"tools.rego":   "package turngate.tool_call\n\nblock contains \"never\" if input.requestId == \"\"\n",
	"results.rego": "package turngate.tool_result\n\nredact contains p if {\n\tinput.tool.name == \"weather\"\n\tp := sprintf(\"/x%d\", [1 / 0])\n}\n",
}

// TestRequestIDEveryHook runs one tool turn with rules for every hook and
// an extension subscribed to every hook, and checks that each sees the
// same request id — the client's X-Request-Id — and the turn's deadline
// (turn.deadline, input.deadline, the envelope's):
// every decision record and the input its rules read (turn.requestId,
// input.requestId, requestId), every audit record of the turn, and every
// extension delivery.
func TestRequestIDEveryHook(t *testing.T) {
	rules := filepath.Join(t.TempDir(), "rules")
	if err := os.MkdirAll(rules, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range everyHookRules {
		if err := os.WriteFile(filepath.Join(rules, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ext := newFakeExtension(t, extSecret, nil)
	g := newTestGateway(t, "basic", withExtension("all", ext.URL, extSecret, 5*time.Second, 1024, config.ExtensionHooks...),
		func(c *config.Config) {
			c.Rules.Dir = rules
			c.Audit.Sink = config.SinkStdout // the records carry their input
		})
	const id = "req-every-hook-1"
	start := time.Now()
	resp := g.do("POST", "/v1/agents/demo/chat", chatBody("s-every-hook", "u1", "weather in Paris"), "X-Request-Id", id)
	if got := resp.Header.Get("X-Request-Id"); got != id {
		t.Fatalf("X-Request-Id answered %q, want %q", got, id)
	}
	readUIStream(t, resp)
	waitFor(t, "the second onStepFinish", func() bool { return len(ext.deliveries("onStepFinish")) == 2 })
	waitFor(t, "the onChatResponse record", func() bool {
		for line := range strings.Lines(g.auditLog()) {
			if strings.Contains(line, `"kind":"onChatResponse"`) && strings.Contains(line, `"requestId":"`+id+`"`) {
				return true
			}
		}
		return false
	})

	hooks := map[string]bool{}
	for line := range strings.Lines(g.auditLog()) {
		var rec struct {
			Kind      string `json:"kind"`
			Hook      string `json:"hook"`
			SessionID string `json:"sessionId"`
			RequestID string `json:"requestId"`
			Outcome   string `json:"outcome"`
			Input     *struct {
				RequestID string `json:"requestId"`
				// Deadline is the Rego input's.
				Deadline string `json:"deadline"`
				Turn     *struct {
					RequestID string    `json:"requestId"`
					Deadline  time.Time `json:"deadline"`
				} `json:"turn"`
			} `json:"input"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.SessionID != "s-every-hook" {
			continue
		}
		name := rec.Kind
		switch {
		case rec.Kind == "decision" && rec.Input == nil:
			// A failed toolResult's record keeps no input (the output
			// the model never saw); every other decision has one.
			if rec.Hook != "toolResult" || rec.Outcome != "error" {
				t.Errorf("%s record without input: %s", rec.Hook, line)
			}
			name = rec.Hook
		case rec.Kind == "decision":
			name = rec.Hook
			read := rec.Input.RequestID
			if rec.Input.Turn != nil {
				read = rec.Input.Turn.RequestID
				if d := rec.Input.Turn.Deadline; d.Before(start) || d.After(start.Add(g.cfg.Limits.TurnTimeout+time.Minute)) {
					t.Errorf("%s: the rules read turn.deadline %v, want the turn's start + limits.turnTimeout", name, d)
				}
			}
			if rec.Hook == "beforeToolCall" {
				if d, err := time.Parse(time.RFC3339Nano, rec.Input.Deadline); err != nil || d.Before(start) {
					t.Errorf("beforeToolCall: the rules read input.deadline %q, want the turn's", rec.Input.Deadline)
				}
			}
			if read != id {
				t.Errorf("%s: the rules read requestId %q, want %q (%s)", name, read, id, line)
			}
		}
		if rec.RequestID != id {
			t.Errorf("%s record: requestId %q, want %q", name, rec.RequestID, id)
		}
		hooks[name] = true
	}
	for _, h := range []string{"beforeTurn", "beforeStep", "beforeToolCall", "toolResult", "onChatError", "beforePersist",
		"afterToolCall", "onStepFinish", "onChatResponse", "turn"} {
		if !hooks[h] {
			t.Errorf("no %s record of the turn (have %v)", h, slices.Sorted(func(yield func(string) bool) {
				for k := range hooks {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}

	seen := map[string]bool{}
	for _, d := range ext.deliveries("") {
		seen[d.Hook] = true
		if d.RequestID != id {
			t.Errorf("extension delivery %d (%s): requestId %q, want %q", d.ID, d.Hook, d.RequestID, id)
		}
		if d.Deadline.Before(start) || d.Aborted {
			t.Errorf("extension delivery %d (%s): deadline %v, aborted %v; want the turn's deadline, not aborted", d.ID, d.Hook, d.Deadline, d.Aborted)
		}
	}
	for _, h := range config.ExtensionHooks {
		if !seen[h] {
			t.Errorf("the extension got no %s delivery", h)
		}
	}
}
