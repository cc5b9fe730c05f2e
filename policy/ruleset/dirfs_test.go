package ruleset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/policy"
)

// TestLoadRefusesLinksOut: a rule file that is a symbolic link out of the
// rules directory — absolute, relative, through a "..data" link that leads
// out, or dangling outside — is an io_error at the link, and what it
// points to is never read, so no diagnostic quotes it (issue 28 finding
// 12). Links that stay inside load, as TestLoadConfigMapLayout's do.
func TestLoadRefusesLinksOut(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.yaml")
	if err := os.WriteFile(secret, []byte("SECRET-LINE: {not: [a rule file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		links func(dir string) map[string]string // link name in dir -> target
	}{
		{"absolute", func(string) map[string]string { return map[string]string{"turn.yaml": secret} }},
		{"relative", func(dir string) map[string]string {
			rel, err := filepath.Rel(dir, secret)
			if err != nil {
				t.Fatal(err)
			}
			return map[string]string{"turn.yaml": rel}
		}},
		{"through ..data", func(string) map[string]string {
			return map[string]string{"..data": outside, "turn.yaml": filepath.Join("..data", "secret.yaml")}
		}},
		{"dangling outside", func(string) map[string]string {
			return map[string]string{"turn.yaml": filepath.Join(outside, "missing.yaml")}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := rulesDir(t, map[string]string{"10-turn.yaml": celTurn, "inside.yaml": celStep})
			// A link to a file inside the directory still loads.
			if err := os.Symlink("inside.yaml", filepath.Join(dir, "20-step.yaml")); err != nil {
				t.Fatal(err)
			}
			for name, target := range tt.links(dir) {
				if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			_, errs := Load(dir, Options{})
			if len(errs) != 1 || errs[0].Code != policy.CodeIO || errs[0].Location.File != filepath.Join(dir, "turn.yaml") ||
				!strings.Contains(errs[0].Message, "symbolic link out of the rules directory") {
				t.Fatalf("errs = %v, want one io_error at turn.yaml naming the link out", errs)
			}
			if text := errs.Error(); strings.Contains(text, "SECRET-LINE") || strings.Contains(text, outside) {
				t.Errorf("the diagnostic shows what the link points to: %s", text)
			}
		})
	}
}
