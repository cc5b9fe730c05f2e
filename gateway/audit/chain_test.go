package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/internal/golden"
	"github.com/turngate/turngate/policy"
)

const intactFile = "testdata/chain/intact.jsonl"

// writeChain writes one record of every kind to a Log stamped at a fixed
// time, as two chains: the second one's start names the first one's last
// line (as after a restart).
func writeChain(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	at := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
	step := 0
	for range 2 {
		l := newLog(&buf, []string{"decision.input.password"}, nil)
		l.now = func() time.Time { return at }
		if err := l.resumeFrom(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		if err := l.startChain(ChainOpened); err != nil {
			t.Fatal(err)
		}
		id := engine.Identity{RequestID: "req_1", SessionID: "s1", Agent: "demo", Principal: engine.Principal{Tenant: "acme"}}
		l.Record(&policy.Record{Time: at, Hook: policy.HookBeforeToolCall, Revision: "sha256:1", RequestID: "req_1", SessionID: "s1", Agent: "demo", Tenant: "acme",
			StepNumber: &step, ToolCallID: "call_0_0", ToolName: "login", Outcome: policy.OutcomeMatched, RulesFired: []string{"data.turngate.tool_call.patch"},
			Decision: &engine.ToolCallDecision{Action: engine.ActionAllow, Input: json.RawMessage(`{"user":"ann","password":"hunter2"}`)}})
		h := l.Hooks()
		h.AfterToolCall(context.Background(), &engine.ToolCallResultContext{Identity: id, ToolCallID: "call_0_0", ToolName: "login",
			Success: true, Output: json.RawMessage(`{"ok":true}`), Decision: engine.DecisionAllow, Executed: true, DurationMs: 1.5})
		h.OnStepFinish(context.Background(), &engine.StepResult{Identity: id, Model: "demo", FinishReason: engine.FinishToolCalls,
			ToolCalls: []engine.ToolCall{{}}, ToolResults: []engine.ToolResult{{}}, Usage: engine.Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12, CachedInputTokens: 8}})
		h.OnChatResponse(context.Background(), &engine.ChatResponseResult{Identity: id, Status: engine.StatusCompleted, FinishReason: engine.FinishStop, Steps: 2})
		l.Turn(&Turn{Time: at, RequestID: "req_1", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: engine.StatusCompleted, Steps: 2})
	}
	return buf.String()
}

// resumeFrom is resume for a sink that already holds data.
func (l *Log) resumeFrom(data []byte) error {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("turngate-audit-%d", time.Now().UnixNano()))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	defer os.Remove(path)
	return l.resume(path)
}

// The writer's chained lines are stable (golden) and verify.
func TestChainGolden(t *testing.T) {
	got := writeChain(t)
	golden.Check(t, intactFile, got)
	v := &Verifier{}
	if err := v.Verify(strings.NewReader(got), "written"); err != nil {
		t.Errorf("the written chain does not verify: %v", err)
	}
	if v.Records != 12 || v.Chains != 2 {
		t.Errorf("%d records in %d chains, want 12 in 2", v.Records, v.Chains)
	}
}

func TestVerifyNamesTheFirstBreak(t *testing.T) {
	data, err := os.ReadFile(intactFile)
	if err != nil {
		t.Fatal(err)
	}
	intact := strings.SplitAfter(string(data), "\n")
	intact = intact[:len(intact)-1] // the empty string after the last newline
	edit := func(f func(lines []string) []string) string {
		return strings.Join(f(append([]string(nil), intact...)), "")
	}
	tests := []struct {
		name   string
		data   string
		line   int
		reason string
	}{
		{"intact", string(data), 0, ""},
		{"field edited", edit(func(l []string) []string {
			l[1] = strings.Replace(l[1], `"action":"allow"`, `"action":"block"`, 1)
			return l
		}), 3, "prevHash "},
		{"line deleted", edit(func(l []string) []string { return append(l[:2], l[3:]...) }), 3, "seq 3, want 2 (after seq 1 at f.jsonl:2)"},
		{"lines swapped", edit(func(l []string) []string { l[2], l[3] = l[3], l[2]; return l }), 3, "seq 3, want 2"},
		{"line duplicated", edit(func(l []string) []string { return append(l[:3], l[2:]...) }), 4, "seq 2, want 3"},
		{"head removed", edit(func(l []string) []string { return l[1:] }), 1, "decision record (seq 1) before any chain-start"},
		{"restart marker edited", edit(func(l []string) []string {
			l[6] = strings.Replace(l[6], `"reason":"opened"`, `"reason":"rotated"`, 1)
			return l
		}), 8, "prevHash "},
		{"a whole chain removed", edit(func(l []string) []string { return append(l[:2], l[6:]...) }), 3, "chain-start has prevHash "},
		{"last line cut", strings.TrimSuffix(string(data), "\n"), 12, "no newline"},
		{"not JSON", edit(func(l []string) []string { l[4] = "time=2026 level=INFO msg=hello\n"; return l }), 5, "not an audit record"},
		{"seq removed", edit(func(l []string) []string { l[1] = strings.Replace(l[1], `"seq":1,`, ``, 1); return l }), 2, "no seq"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := &Verifier{}
			err := v.Verify(strings.NewReader(tc.data), "f.jsonl")
			if tc.line == 0 {
				if err != nil || v.Records != 12 || v.Chains != 2 {
					t.Fatalf("intact file: %v (%d records, %d chains)", err, v.Records, v.Chains)
				}
				return
			}
			var br *Break
			if !errors.As(err, &br) {
				t.Fatalf("got %v, want a break at line %d", err, tc.line)
			}
			if br.File != "f.jsonl" || br.Line != tc.line || !strings.Contains(br.Msg, tc.reason) {
				t.Errorf("break %v, want f.jsonl:%d: …%s…", br, tc.line, tc.reason)
			}
		})
	}
}

// A file sink's chain survives rotations and restarts: every file starts
// with a chain-start naming the hash of the line before it, and the files
// verify in the order they were written, not in another.
func TestFileSinkChainsAcrossRotationAndRestart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	cfg := config.Audit{Sink: config.SinkFile, Path: path, MaxSizeMB: 1, MaxBackups: 5}
	big := strings.Repeat("x", 200<<10)
	for run := range 2 { // a restart
		if run > 0 {
			// lumberjack names backups by the millisecond: two rotations
			// within one would write the same backup.
			time.Sleep(2 * time.Millisecond)
		}
		l, err := Open(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 6 { // 1.2 MiB per run: a rotation each
			l.Turn(&Turn{RequestID: big})
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "audit*.jsonl")) // backups sort before the live file, oldest first
	if len(files) != 3 {
		t.Fatalf("%d files, want 2 backups and the live one: %v", len(files), files)
	}
	v := &Verifier{}
	for i, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !bytes.HasPrefix(data, []byte(`{"kind":"chain-start","prevHash":"`)) {
			t.Errorf("%s starts with %.60s, want a chain-start naming the previous hash", f, data)
		}
		if err := v.Verify(bytes.NewReader(data), f); err != nil {
			t.Fatalf("verify: %v", err)
		}
	}
	if v.Records != 16 || v.Chains != 4 || len(v.Unanchored) != 0 {
		t.Errorf("%d records in %d chains, unanchored %v; want 16 in 4 (opened, rotated, opened, rotated), all anchored", v.Records, v.Chains, v.Unanchored)
	}

	v = &Verifier{}
	var err error
	for _, f := range []string{files[1], files[0], files[2]} {
		data, _ := os.ReadFile(f)
		if err = v.Verify(bytes.NewReader(data), f); err != nil {
			break
		}
	}
	// The oldest file's chain-start names no previous hash, so it may
	// follow anything; the live file's then names the wrong line.
	if br := (*Break)(nil); !errors.As(err, &br) || br.File != files[2] || br.Line != 1 || len(v.Unanchored) != 1 {
		t.Errorf("files out of order: %v (unanchored %v), want a break at %s:1 and %s:1 unanchored", err, v.Unanchored, files[2], files[1])
	}
}

func FuzzParseChainLine(f *testing.F) {
	data, err := os.ReadFile(intactFile)
	if err != nil {
		f.Fatal(err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		f.Add([]byte(line))
	}
	for _, s := range []string{``, `{}`, `[]`, `{"kind":"x","seq":-1}`, `{"kind":"x","seq":1e3,"prevHash":"00"}`, `{"kind":"chain-start","seq":0}`, "{\"kind\":\"x\",\"seq\":18446744073709551616}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, err := ParseChainLine(line)
		if err != nil {
			return
		}
		if got.Kind == "" || (got.PrevHash == "" && got.Kind != KindChainStart) || (got.PrevHash != "" && !isHexDigest(got.PrevHash)) {
			t.Errorf("ParseChainLine(%q) = %+v without an error", line, got)
		}
		v := &Verifier{}
		_ = v.Verify(bytes.NewReader(append(line, '\n')), "fuzz")
	})
}
