// Package testprogress condenses `go test -json ./...` into the lines a
// person watching CI wants: one per finished package, a line every so often
// naming what is still running and for how long, and the whole output of
// every failed test and package. Plain `go test ./...` prints a package
// only when it ends, so a suite whose end-to-end package runs for minutes
// looks hung; with -json, cmd/go streams each event as it happens.
package testprogress

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent), and of
// the build events cmd/go adds (build-output, build-fail).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// Report tracks a run. Its methods are not safe for concurrent use.
type Report struct {
	out io.Writer
	// running are the packages started and not finished, with the tests
	// running in each and when they started.
	running map[string]map[string]time.Time
	started map[string]time.Time
	// output keeps each package's and each test's output until it passes,
	// to print it whole when it fails.
	output map[string][]string
	failed []string
	// passed, failedTests and skipped count tests (subtests included) for
	// the closing line.
	passed, failedTests, skipped int
}

// NewReport returns a Report that writes to out.
func NewReport(out io.Writer) *Report {
	return &Report{out: out, running: map[string]map[string]time.Time{}, started: map[string]time.Time{}, output: map[string][]string{}}
}

// Line takes one line of go test's output. A line that is not a JSON event
// (a build error on stderr merged in, say) is printed as it is.
func (r *Report) Line(line []byte) {
	var e event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
		fmt.Fprintf(r.out, "%s\n", line)
		return
	}
	pkg := cmp.Or(e.Package, e.ImportPath)
	key := pkg + " " + e.Test
	switch e.Action {
	case "start":
		r.running[pkg], r.started[pkg] = map[string]time.Time{}, e.Time
	case "run":
		if r.running[pkg] == nil {
			r.running[pkg], r.started[pkg] = map[string]time.Time{}, e.Time
		}
		r.running[pkg][e.Test] = e.Time
	case "output", "build-output":
		r.output[key] = append(r.output[key], e.Output)
	case "pass", "skip":
		if e.Test == "" {
			if e.Action == "skip" {
				fmt.Fprintf(r.out, "?   \t%s\t[no test files]\n", pkg)
			} else {
				fmt.Fprintf(r.out, "ok  \t%s\t%.3fs\n", pkg, e.Elapsed)
			}
			r.done(pkg)
			return
		}
		if e.Action == "skip" {
			r.skipped++
		} else {
			r.passed++
		}
		delete(r.running[pkg], e.Test)
		delete(r.output, key)
	case "fail", "build-fail":
		if e.Test != "" {
			r.failedTests++
			delete(r.running[pkg], e.Test)
			r.failed = append(r.failed, key)
			fmt.Fprintf(r.out, "--- FAIL %s %s (%.1fs)\n%s", pkg, e.Test, e.Elapsed, strings.Join(r.output[key], ""))
			delete(r.output, key)
			return
		}
		fmt.Fprintf(r.out, "FAIL\t%s\t%.3fs\n%s", pkg, e.Elapsed, strings.Join(r.output[key], ""))
		r.failed = append(r.failed, pkg)
		r.done(pkg)
	}
}

func (r *Report) done(pkg string) {
	delete(r.running, pkg)
	delete(r.started, pkg)
	for k := range r.output {
		if strings.HasPrefix(k, pkg+" ") {
			delete(r.output, k)
		}
	}
}

// Running prints what is still running at now: each package, for how long,
// and its longest-running test.
func (r *Report) Running(now time.Time) {
	if len(r.running) == 0 {
		return
	}
	var parts []string
	for _, pkg := range slices.Sorted(maps.Keys(r.running)) {
		part := fmt.Sprintf("%s %s", pkg, now.Sub(r.started[pkg]).Round(time.Second))
		var longest string
		var since time.Time
		for test, at := range r.running[pkg] {
			if longest == "" || at.Before(since) || (at.Equal(since) && test < longest) {
				longest, since = test, at
			}
		}
		if longest != "" {
			part += fmt.Sprintf(" (%s %s)", longest, now.Sub(since).Round(time.Second))
		}
		parts = append(parts, part)
	}
	fmt.Fprintf(r.out, "...   running: %s\n", strings.Join(parts, ", "))
}

// Summary prints the closing line, go test's counts of every test and
// subtest: "tests: N passed, N failed, N skipped".
func (r *Report) Summary() {
	fmt.Fprintf(r.out, "tests: %d passed, %d failed, %d skipped\n", r.passed, r.failedTests, r.skipped)
}

// Failed lists what failed: "pkg" for a package, "pkg Test" for a test.
func (r *Report) Failed() []string { return slices.Clone(r.failed) }

// Run reads go test -json output from in until it ends, printing a
// Running line every interval and the Summary at the end, and returns
// whether anything failed.
func Run(in io.Reader, out io.Writer, interval time.Duration) (failed bool) {
	r := NewReport(out)
	lines := make(chan []byte)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- slices.Clone(sc.Bytes())
		}
		close(lines)
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				r.Summary()
				return len(r.failed) > 0
			}
			r.Line(line)
		case now := <-tick.C:
			r.Running(now)
		}
	}
}
