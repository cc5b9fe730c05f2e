package celrules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// seedFiles adds every rule and test file under testdata to a fuzz corpus.
func seedFiles(f *testing.F) {
	paths, _ := filepath.Glob("testdata/diag/*.yaml")
	more, _ := filepath.Glob("testdata/cookbook/*/*.yaml")
	for _, p := range append(paths, more...) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// FuzzCompile feeds arbitrary rule files to Compile: it must never panic or
// hang, and every diagnostic must point inside the file.
func FuzzCompile(f *testing.F) {
	seedFiles(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		set, errs := Compile([]policy.File{{Path: "f.yaml", Data: data}}, Options{})
		if (set == nil) == (errs == nil) {
			t.Fatalf("set %v with errors %v", set, errs)
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, e := range errs {
			if e.Location.Line < 0 || e.Location.Line > lines || e.Location.Column < 0 {
				t.Fatalf("diagnostic outside the file (%d lines): %v", lines, e)
			}
		}
	})
}

// FuzzScalarPositions checks the YAML-to-file position mapping on every
// scalar of arbitrary documents: offsets stay inside the file and never go
// backwards.
func FuzzScalarPositions(f *testing.F) {
	seedFiles(f)
	f.Add([]byte("a: \"x\\\n  y \\u00e9 \\x41\"\nb: 'it''s'\nc: >\n  folded\n  text\n\n  para\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var doc yaml.Node
		if yaml.Unmarshal(data, &doc) != nil {
			return
		}
		src := newSource(policy.File{Path: "f.yaml", Data: data})
		var walk func(n *yaml.Node)
		walk = func(n *yaml.Node) {
			if n.Kind == yaml.ScalarNode && n.Line > 0 {
				offs := src.scalarPositions(n)
				for i, o := range offs {
					if o < 0 || o > len(data) || (i > 0 && o < offs[i-1]) {
						t.Fatalf("offsets %v out of order or range for %q", offs, n.Value)
					}
				}
			}
			for _, c := range n.Content {
				walk(c)
			}
		}
		walk(&doc)
	})
}

// FuzzDecodeInput feeds arbitrary dry-run inputs and test files.
func FuzzDecodeInput(f *testing.F) {
	seedFiles(f)
	f.Add([]byte(`{"turn": {"model": "m"}, "principal": {"tenant": "t"}, "now": "2025-01-01T00:00:00Z"}`))
	set, errs := Compile(nil, Options{})
	if errs != nil {
		f.Fatal(errs)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if in, err := DecodeInput(data); err == nil {
			in.TurnContext()
			in.StepContext()
		}
		RunTests(set, []policy.File{{Path: "f_test.yaml", Data: data}})
	})
}
