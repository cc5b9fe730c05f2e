package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/policy/ruleset"
)

// beforePersist decisions are recorded and replayed like the other hooks':
// a candidate that masks what the live rules stored as it was shows as
// allow-to-patch, and the record of a masked message holds it masked.
func TestReplayBeforePersist(t *testing.T) {
	live, candidate := abs(t, "testdata/replay/persist-live"), abs(t, "testdata/replay/persist-candidate")
	t.Chdir(t.TempDir())
	recorded := recordAudit(t, live, time.Unix(0, 0), func(rev *ruleset.Revision, log *audit.Log) {
		id := &engine.Identity{RequestID: "r1", SessionID: "s1", Agent: "demo", Principal: engine.Principal{Tenant: "acme"}}
		for _, text := range []string{"card 4111 1111 1111 1234", "mail ann@example.com"} {
			m := engine.UIMessage{ID: "m", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: text}}}
			if _, err := rev.BeforePersist(context.Background(), log, id, m); err != nil {
				t.Fatal(err)
			}
		}
	})
	if strings.Contains(string(recorded), "1111 1234") || !strings.Contains(string(recorded), "card [card]") {
		t.Errorf("the audit log holds the card number or lacks the masked message:\n%s", recorded)
	}
	for _, tc := range []struct {
		failOn string
		code   int
	}{{"allow-to-patch", 1}, {"patch-to-allow", 0}, {"patch-changed", 0}, {"any", 1}} {
		replayExits(t, tc.code, "--audit", "audit.jsonl", "--rules", candidate, "--fail-on", tc.failOn)
	}

	// turngate eval dry-runs the hook on an input file.
	input := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(input, []byte("message: {id: m, role: user, parts: [{type: text, text: 'pay 4111111111111234'}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("eval", "--hook", "beforePersist", "--input", input, live)
	if code != 0 {
		t.Fatalf("eval: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, `"masked": 1`) {
		t.Errorf("eval printed %s, want one match masked", stdout)
	}
}
