package audit

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/policy"
)

func TestRecordLinesAndRedaction(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, []string{"decision.input.password", "decision.headers.*"}, nil)
	l.Record(&policy.Record{Hook: policy.HookBeforeToolCall, Revision: "sha256:1", RequestID: "r1", Tenant: "t",
		Outcome: policy.OutcomeMatched, RulesFired: []string{"data.turngate.tool_call.patch"},
		Decision: map[string]any{"action": "allow", "input": map[string]any{"user": "u", "password": "hunter2"},
			"headers": map[string]any{"Authorization": "Bearer x"}},
		Shadow: &policy.Shadow{Changed: true, Decision: map[string]any{"action": "allow",
			"input": map[string]any{"user": "u", "password": "shadow-hunter2"}}}})
	l.Turn(&Turn{RequestID: "r1", Tenant: "t", SessionID: "s", Agent: "demo", Status: "completed"})

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], `{"kind":"chain-start","reason":"opened","seq":0,"time":`) {
		t.Fatalf("%d lines, want a chain-start and 2 records: %s", len(lines), buf.String())
	}
	lines = lines[1:]
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	dec := rec["decision"].(map[string]any)
	if rec["kind"] != KindDecision || dec["input"].(map[string]any)["password"] != Redacted || dec["input"].(map[string]any)["user"] != "u" {
		t.Errorf("decision line %s", lines[0])
	}
	if dec["headers"].(map[string]any)["Authorization"] != Redacted {
		t.Errorf("wildcard redaction missed: %s", lines[0])
	}
	shadow := rec["shadow"].(map[string]any)["decision"].(map[string]any)["input"].(map[string]any)
	if shadow["password"] != Redacted || shadow["user"] != "u" {
		t.Errorf("a decision path did not redact the shadow decision: %s", lines[0])
	}
	if strings.Contains(buf.String(), "hunter2") || strings.Contains(buf.String(), "Bearer x") {
		t.Error("a redacted value reached the log")
	}
	var turn map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &turn); err != nil {
		t.Fatal(err)
	}
	if turn["kind"] != KindTurn || turn["status"] != "completed" || turn["sessionId"] != "s" {
		t.Errorf("turn line %s", lines[1])
	}
}

func TestFileSinkRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	l, err := Open(config.Audit{Sink: config.SinkFile, Path: path, MaxSizeMB: 1, MaxBackups: 2}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10)
	for range 40 { // 2.5 MiB in 64 KiB records: at least two rotations
		l.Turn(&Turn{RequestID: big})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "audit*.jsonl"))
	if len(files) != 3 {
		t.Errorf("%d files after rotation, want the live one and 2 backups: %v", len(files), files)
	}
	data, err := os.ReadFile(path)
	if err != nil || !bytes.HasSuffix(data, []byte("}\n")) {
		t.Errorf("live file: %v", err)
	}
}
