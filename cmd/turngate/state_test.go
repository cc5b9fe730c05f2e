package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/rulestate"
	"github.com/turngate/turngate/gateway/store"
	replaypkg "github.com/turngate/turngate/policy/replay"
	"github.com/turngate/turngate/policy/ruleset"
)

// recordStateTraffic writes the audit log of 21 send_email calls by one
// principal under the rules of dir, with their state read and counted in
// a real store: the 21st is blocked by the limit. It returns the log's
// lines.
func recordStateTraffic(t *testing.T, dir string) []string {
	t.Helper()
	rev, errs := ruleset.Load(dir, ruleset.Options{})
	if errs != nil {
		t.Fatal(errs)
	}
	st, err := store.OpenSQLite(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var buf bytes.Buffer
	log := audit.New(&buf, nil, slog.New(slog.DiscardHandler))
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	h := rulestate.New(st, rulestate.Options{Now: func() time.Time { return now }}).Hooks(rev, rev.Hooks(log, ruleset.FailClosed))
	for i := range 21 {
		tc := &engine.ToolCallContext{Identity: engine.Identity{RequestID: fmt.Sprint("req-", i), SessionID: fmt.Sprint("s", i), Agent: "demo",
			Principal: engine.Principal{Tenant: "acme", Subject: "ann"}}, Type: "tool-call", ToolCallID: "call_1", ToolName: "send_email",
			Input: json.RawMessage(`{"to": "bob@example.com"}`), Tool: engine.ToolInfo{Name: "send_email", Kind: engine.ToolKindBuiltin}}
		d, err := h.BeforeToolCall(context.Background(), tc)
		if blocked := err == nil && d != nil && d.Action == engine.ActionBlock; blocked != (i == 20) {
			t.Fatalf("call %d: decision %+v, %v", i+1, d, err)
		}
	}
	log.Flush() // the decision records are written by the log's writer
	if err := os.WriteFile("audit.jsonl", buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(buf.String()), "\n")
}

// TestReplayState: a decision that depended on declared state replays
// exactly from its audit record (the values read are in it), `turngate
// eval --input` of the record reproduces the block, and a candidate that
// reads state the records do not hold is reported as not replayable for
// each of them, never evaluated on a guess.
func TestReplayState(t *testing.T) {
	rules, candidate := abs(t, "testdata/state/rules"), abs(t, "testdata/state/candidate")
	t.Chdir(t.TempDir())
	lines := recordStateTraffic(t, rules)
	blocked := lines[len(lines)-1]
	if !strings.Contains(blocked, `"state":{"emails_per_hour":20}`) {
		t.Fatalf("the 21st record does not carry the state it read:\n%s", lines[len(lines)-1])
	}

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"replay", "--audit", "audit.jsonl", "--rules", rules, "--format", "json", "--fail-on", "any"}, &stdout, &stderr); code != 0 {
		t.Fatalf("replay against the recording rules: exit %d\n%s%s", code, &stdout, &stderr)
	}
	var rep replaypkg.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 21 || rep.Unchanged != 21 || rep.UnrecordedState != 0 {
		t.Fatalf("replay against the recording rules: %+v", rep)
	}

	if err := os.WriteFile("blocked.json", []byte(blocked), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"eval", "--input", "blocked.json", rules}, &stdout, &stderr); code != 0 {
		t.Fatalf("eval: exit %d\n%s%s", code, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "at most 20 emails an hour") {
		t.Fatalf("eval of the blocked record does not block:\n%s", &stdout)
	}

	stdout.Reset()
	if code := run(context.Background(), []string{"replay", "--audit", "audit.jsonl", "--rules", candidate, "--format", "json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("replay against the candidate: exit %d\n%s%s", code, &stdout, &stderr)
	}
	rep = replaypkg.Report{}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Replayed != 0 || rep.NotReplayable != 21 || rep.UnrecordedState != 21 || !strings.Contains(rep.UnrecordedStateExample, "emails_per_day") {
		t.Fatalf("replay against a candidate reading unrecorded state: %+v", rep)
	}
	// The summary does not call them recorded without an input: they hold
	// one, without the state the candidate reads.
	stdout.Reset()
	if code := run(context.Background(), []string{"replay", "--audit", "audit.jsonl", "--rules", candidate}, &stdout, &stderr); code != 0 {
		t.Fatalf("replay against the candidate: exit %d\n%s%s", code, &stdout, &stderr)
	}
	if out := stdout.String(); strings.Contains(out, "without an input") || !strings.Contains(out, "of which reading state the record does not hold: 21") {
		t.Fatalf("replay's summary of decisions that lack the candidate's state:\n%s", out)
	}
}
