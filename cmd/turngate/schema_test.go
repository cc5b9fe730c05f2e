package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/turngate/turngate/internal/golden"
)

// TestSchemaCommand prints each schema (golden files) and type-checks a
// rules directory with and without the config whose bodySchema types
// input.body.
func TestSchemaCommand(t *testing.T) {
	const dir = "testdata/schema"
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		golden string // stdout; empty means stdout must be empty
	}{
		{"tool_call", []string{"schema", "tool_call"}, 0, "tool_call.json"},
		{"tool_result", []string{"schema", "tool_result"}, 0, "tool_result.json"},
		{"turn", []string{"schema", "turn"}, 0, "turn.json"},
		{"step", []string{"schema", "step"}, 0, "step.json"},
		{"tool_call with a config's bodySchema", []string{"schema", "--config", dir + "/config.yaml", "tool_call"}, 0, "tool_call_body.json"},
		{"tool_call with a rules directory's declared state", []string{"schema", "--rules", "testdata/state/candidate", "tool_call"}, 0, "tool_call_state.json"},
		{"unknown schema", []string{"schema", "tool_calls"}, 2, ""},
		{"no schema named", []string{"schema"}, 2, ""},
		{"check: input.body is open without a config", []string{"check", dir + "/rules"}, 0, "check_open_body.golden"},
		{"check: input.body typed by the config", []string{"check", "--config", dir + "/config.yaml", dir + "/rules"}, 1, "check_typed_body.golden"},
		{"check: a config that does not load", []string{"check", "--config", dir + "/nope.yaml", dir + "/rules"}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, &stdout, &stderr)
			}
			if tc.golden == "" {
				if stdout.Len() > 0 || stderr.Len() == 0 {
					t.Errorf("stdout = %q, stderr = %q; want only an error on stderr", &stdout, &stderr)
				}
				return
			}
			golden.Check(t, filepath.Join(dir, tc.golden), stdout.String())
		})
	}
}
