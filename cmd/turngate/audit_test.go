package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// intactAudit is the audit package's golden chained file: two chains of
// one record of every kind.
const intactAudit = "../../gateway/audit/testdata/chain/intact.jsonl"

func TestAuditVerify(t *testing.T) {
	data, err := os.ReadFile(intactAudit)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	lines := strings.SplitAfter(string(data), "\n")
	edited := write("edited.jsonl", strings.Replace(string(data), `"outputBytes":11`, `"outputBytes":12`, 1))
	swapped := write("swapped.jsonl", lines[0]+lines[2]+lines[1]+strings.Join(lines[3:], ""))
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"intact", []string{intactAudit}, 0, "ok: 12 records in 2 chains in 1 files; last seq 5, last hash ", ""},
		{"edited", []string{edited}, 1, "", "chain broken at " + edited + ":4: prevHash "},
		{"swapped", []string{swapped}, 1, "", swapped + ":2: seq 2, want 1 (after seq 0 at " + swapped + ":1)"},
		{"missing file", []string{filepath.Join(dir, "nope.jsonl")}, 1, "", "no such file"},
		{"no file", nil, 2, "", "usage: turngate audit verify FILE..."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"audit", "verify"}, tc.args...)
			if code := run(context.Background(), args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
			}
		})
	}
}
