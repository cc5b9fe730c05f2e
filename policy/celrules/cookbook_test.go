package celrules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/turngate/turngate/policy"
)

// TestCookbook runs every example in testdata/cookbook: each directory holds
// one of the reference's TypeScript beforeTurn/beforeStep examples as a rule
// file (rules.yaml) and the cases that prove it (rules_test.yaml).
func TestCookbook(t *testing.T) {
	dirs, err := filepath.Glob("testdata/cookbook/*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != 14 {
		t.Errorf("found %d cookbook examples, want 14", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rules, tests := loadDir(t, dir)
			set, errs := Compile(rules, Options{})
			if errs != nil {
				t.Fatal(errs)
			}
			results, errs := RunTests(set, tests)
			if errs != nil {
				t.Fatal(errs)
			}
			if len(results) == 0 {
				t.Fatal("no test cases")
			}
			for _, r := range results {
				if !r.Passed {
					t.Errorf("%s: %s: %s", r.Location, r.Name, r.Message)
				}
			}
		})
	}
}

// loadDir splits a directory's YAML files into rule and test files.
func loadDir(t testing.TB, dir string) (rules, tests []policy.File) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f := policy.File{Path: filepath.Base(p), Data: data}
		if strings.HasSuffix(p, "_test.yaml") {
			tests = append(tests, f)
		} else {
			rules = append(rules, f)
		}
	}
	return rules, tests
}
