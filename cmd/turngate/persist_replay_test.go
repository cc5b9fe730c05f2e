package main

import (
	"bytes"
	"context"
	"log/slog"
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
	rev, errs := ruleset.Load(live, ruleset.Options{Now: func() time.Time { return time.Unix(0, 0) }})
	if errs != nil {
		t.Fatal(errs)
	}
	f, err := os.Create("audit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	log := audit.New(f, nil, slog.New(slog.DiscardHandler))
	id := &engine.Identity{RequestID: "r1", SessionID: "s1", Agent: "demo", Principal: engine.Principal{Tenant: "acme"}}
	for _, text := range []string{"card 4111 1111 1111 1234", "mail ann@example.com"} {
		m := engine.UIMessage{ID: "m", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: text}}}
		if _, err := rev.BeforePersist(context.Background(), log, id, m); err != nil {
			t.Fatal(err)
		}
	}
	log.Close()
	f.Close()
	recorded, _ := os.ReadFile("audit.jsonl")
	if strings.Contains(string(recorded), "1111 1234") || !strings.Contains(string(recorded), "card [card]") {
		t.Errorf("the audit log holds the card number or lacks the masked message:\n%s", recorded)
	}
	for _, tc := range []struct {
		failOn string
		code   int
	}{{"allow-to-patch", 1}, {"patch-to-allow", 0}, {"patch-changed", 0}, {"any", 1}} {
		var stdout, stderr bytes.Buffer
		args := []string{"replay", "--audit", "audit.jsonl", "--rules", candidate, "--fail-on", tc.failOn}
		if code := run(context.Background(), args, &stdout, &stderr); code != tc.code {
			t.Errorf("--fail-on %s: exit %d, want %d\n%s%s", tc.failOn, code, tc.code, &stdout, &stderr)
		}
	}

	// turngate eval dry-runs the hook on an input file.
	input := filepath.Join(t.TempDir(), "in.yaml")
	if err := os.WriteFile(input, []byte("message: {id: m, role: user, parts: [{type: text, text: 'pay 4111111111111234'}]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"eval", "--hook", "beforePersist", "--input", input, live}, &stdout, &stderr); code != 0 {
		t.Fatalf("eval: exit %d\n%s%s", code, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), `"masked": 1`) {
		t.Errorf("eval printed %s, want one match masked", &stdout)
	}
}
