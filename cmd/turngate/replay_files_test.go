package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/internal/dataurl"
	"github.com/turngate/turngate/policy/ruleset"
)

// writeAttachmentRules writes a rule set whose beforeTurn rule reads the turn's
// attachments to dir.
func writeAttachmentRules(t *testing.T, dir, when string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rules := "beforeTurn:\n  - name: big-images\n    when: " + when + "\n    set:\n      maxSteps: '3'\n"
	if err := os.WriteFile(filepath.Join(dir, "turn.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A turn with an image part: its beforeTurn and beforeStep records hold
// the image's media type, size and sha256 instead of its content, the
// log's hash chain verifies, and replay evaluates the recorded input with
// the attachments the rules saw.
func TestReplayFileParts(t *testing.T) {
	t.Chdir(t.TempDir())
	const rule = `turn.attachments.exists(a, a.mediaType == "image/png" && a.size > 1000)`
	writeAttachmentRules(t, "recorded", rule)
	writeAttachmentRules(t, "candidate", `turn.attachments.exists(a, a.mediaType == "image/png" && a.size > 5000)`)

	img := bytes.Repeat([]byte("\x89PNG-not-really-an-image-"), 100) // 2500 bytes
	url := dataurl.Encode("image/png", img)
	encoded := base64.StdEncoding.EncodeToString(img)
	sum := sha256.Sum256(img)
	standIn := "data:image/png;sha256=" + hex.EncodeToString(sum[:]) + ";size=2500"

	recorded := recordAudit(t, "recorded", time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC), func(rev *ruleset.Revision, log *audit.Log) {
		h := rev.Hooks(log, ruleset.FailClosed)
		id := engine.Identity{RequestID: "req-1", SessionID: "s1", Agent: "demo", EntryPath: engine.EntryChat,
			Principal: engine.Principal{Tenant: "acme", Subject: "ann"}}
		ui := []engine.UIMessage{{ID: "m1", Role: engine.RoleUser, Parts: []engine.UIPart{
			{Type: engine.PartText, Text: "what is this?"},
			{Type: engine.PartFile, MediaType: "image/png", URL: url, Filename: "cat.png"}}}}
		msgs := []engine.ModelMessage{{Role: engine.RoleUser, Content: []engine.ContentPart{
			{Type: engine.ContentText, Text: "what is this?"},
			{Type: engine.ContentFile, MediaType: "image/png", URL: url, Filename: "cat.png"}}}}
		tc := &engine.TurnContext{Identity: id, Messages: msgs, MaxSteps: 10, Attachments: engine.Attachments(ui)}
		cfg, err := h.BeforeTurn(context.Background(), tc)
		if err != nil || cfg == nil || cfg.MaxSteps == nil || *cfg.MaxSteps != 3 {
			t.Fatalf("BeforeTurn = %+v, %v; want maxSteps 3", cfg, err)
		}
		if _, err := h.BeforeStep(context.Background(), &engine.PrepareStepContext{Identity: id, Turn: tc, Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		if tc.Messages[0].Content[1].URL != url {
			t.Fatal("recording changed the turn's message")
		}
	})
	if bytes.Contains(recorded, []byte(encoded[:64])) {
		t.Errorf("the audit log holds the file's base64:\n%s", recorded)
	}
	var decisions int
	for _, line := range bytes.Split(bytes.TrimSpace(recorded), []byte("\n")) {
		var rec struct {
			Kind  string          `json:"kind"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind != "decision" {
			continue
		}
		decisions++
		if got := strings.Count(string(rec.Input), `"url":"`+standIn+`"`); got < 1 {
			t.Errorf("record input holds %d stand-ins %q:\n%s", got, standIn, rec.Input)
		}
		if !bytes.Contains(rec.Input, []byte(`"size":2500`)) {
			t.Errorf("record input lacks the attachment's size:\n%s", rec.Input)
		}
	}
	if decisions != 2 {
		t.Errorf("%d decision records, want 2", decisions)
	}
	if err := (&audit.Verifier{}).Verify(bytes.NewReader(recorded), "audit.jsonl"); err != nil {
		t.Errorf("the hash chain does not verify: %v", err)
	}

	for _, tc := range []struct {
		rules string
		code  int
		want  string
	}{
		{"recorded", 0, "replayed 2 of 2 decisions"},
		{"candidate", 1, "changed: 1"}, // the 2500-byte image is no longer over the limit
	} {
		if stdout, _ := replayExits(t, tc.code, "--audit", "audit.jsonl", "--rules", tc.rules, "--fail-on", "any"); !strings.Contains(stdout, tc.want) {
			t.Errorf("%s: report lacks %q:\n%s", tc.rules, tc.want, stdout)
		}
	}
}
