package testprogress

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/golden"
)

// TestReport replays a recorded -json stream (its "TICK time" lines stand
// for the ticker) and compares what a person would read with the golden
// file: passing packages in one line each, the still-running line naming
// the slow package and its longest test, and the output of every failure.
func TestReport(t *testing.T) {
	data, err := os.ReadFile("testdata/run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := NewReport(&out)
	for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		if at, ok := strings.CutPrefix(line, "TICK "); ok {
			now, err := time.Parse(time.RFC3339, at)
			if err != nil {
				t.Fatal(err)
			}
			r.Running(now)
			continue
		}
		r.Line([]byte(line))
	}
	r.Summary()
	golden.Check(t, "testdata/run.golden", out.String())
	want := []string{"example.com/slow TestBroken", "example.com/slow", "example.com/nobuild"}
	if got := r.Failed(); !slices.Equal(got, want) {
		t.Errorf("Failed = %q, want %q", got, want)
	}
}

// Run reports failure when a package failed, and not otherwise.
func TestRun(t *testing.T) {
	pass := `{"Action":"start","Package":"p"}` + "\n" + `{"Action":"pass","Package":"p","Elapsed":0.1}` + "\n"
	var out bytes.Buffer
	if Run(strings.NewReader(pass), &out, time.Hour) || out.String() != "ok  \tp\t0.100s\ntests: 0 passed, 0 failed, 0 skipped\n" {
		t.Errorf("a passing run: failed, or printed %q", &out)
	}
	if !Run(strings.NewReader(`{"Action":"fail","Package":"p","Elapsed":1}`+"\n"), &out, time.Hour) {
		t.Error("a failing run reported success")
	}
}
