package ruleset

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// brokenTurn does not type-check: maxSteps is an int.
const brokenTurn = "beforeTurn:\n  - name: bad\n    when: 'true'\n    set:\n      maxSteps: '\"three\"'\n"

// quiet is a logger that discards everything.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// reloads collects Options.OnReload calls and lets a test wait for one.
type reloads struct {
	mu      sync.Mutex
	results []string
	notify  chan struct{}
}

func newReloads() *reloads { return &reloads{notify: make(chan struct{}, 1)} }

func (r *reloads) onReload(result string, _ error) {
	r.mu.Lock()
	r.results = append(r.results, result)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *reloads) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.results)
}

func (r *reloads) count(result string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.results {
		if x == result {
			n++
		}
	}
	return n
}

// waitTimeout bounds every wait for the watcher; it is a hang guard, not
// an assertion about speed.
const waitTimeout = 20 * time.Second

// waitFor waits until cond holds, re-checking after every reload.
func (r *reloads) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for !cond() {
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("timed out waiting for %s; reloads so far: %v", what, r.results)
		}
	}
}

func newTestManager(t *testing.T, dir string, opts Options) *Manager {
	t.Helper()
	m, err := NewManager(dir, opts, quiet)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m
}

func TestNewManagerFailsOnBrokenSet(t *testing.T) {
	dir := rulesDir(t, map[string]string{"turn.yaml": brokenTurn})
	m, err := NewManager(dir, Options{}, quiet)
	if err == nil {
		t.Fatalf("NewManager succeeded with %v", m.Current().ID())
	}
	errs, ok := errors.AsType[policy.Errors](err)
	if !ok || len(errs) == 0 || errs[0].Location.Line != 5 {
		t.Fatalf("err = %v, want positioned policy.Errors", err)
	}
}

func TestReload(t *testing.T) {
	dir := rulesDir(t, defaultSet())
	rec := newReloads()
	m := newTestManager(t, dir, Options{OnReload: rec.onReload})
	first := m.Current()

	// Unchanged: nothing rebuilt.
	changed, err := m.Reload()
	if changed || err != nil || m.Current() != first {
		t.Fatalf("unchanged reload = %v, %v; revision swapped: %v", changed, err, m.Current() != first)
	}

	// Broken: rejected, the last good revision serves, the error is kept.
	writeFiles(t, dir, map[string]string{"10-turn.yaml": brokenTurn})
	changed, err = m.Reload()
	errs, _ := errors.AsType[policy.Errors](err)
	if changed || len(errs) == 0 {
		t.Fatalf("broken reload = %v, %v; want rejected with errors", changed, err)
	}
	if m.Current() != first {
		t.Fatal("broken reload swapped the revision")
	}
	st := m.Status()
	if st.Revision != first.ID() || len(st.LastError) == 0 || st.ReloadsFailed != 1 {
		t.Fatalf("status after failure = %+v", st)
	}
	if e := st.LastError[0]; filepath.Base(e.Location.File) != "10-turn.yaml" || e.Location.Line != 5 || e.Location.Column == 0 {
		t.Errorf("last error location = %v, want 10-turn.yaml:5:<col>", e.Location)
	}

	// The same broken candidate is not recompiled or recounted.
	if _, err := m.Reload(); err == nil {
		t.Fatal("repeat of a broken candidate succeeded")
	}
	if st := m.Status(); st.ReloadsFailed != 1 {
		t.Errorf("repeat of a broken candidate counted: %d failures", st.ReloadsFailed)
	}

	// Fixed: swapped, error cleared.
	writeFiles(t, dir, map[string]string{"10-turn.yaml": celTurn + "# fixed\n"})
	changed, err = m.Reload()
	if !changed || err != nil {
		t.Fatalf("fixing reload = %v, %v", changed, err)
	}
	st = m.Status()
	if st.Revision == first.ID() || st.LastError != nil || st.ReloadsOK != 1 || st.LastReload == nil {
		t.Fatalf("status after fix = %+v", st)
	}
	want := []string{ReloadUnchanged, ReloadFailure, ReloadSuccess}
	if strings.Join(rec.results, ",") != strings.Join(want, ",") {
		t.Errorf("OnReload results = %v, want %v", rec.results, want)
	}
}

// watch starts m.Watch, waits until its watch is in place (its first
// reload, reported to rec), and stops it when the test ends.
func watch(t *testing.T, m *Manager, rec *reloads) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Watch(ctx) }()
	rec.waitFor(t, "the watch to start", func() bool { return rec.total() > 0 })
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
}

// watchOptions reacts to fsnotify only: no poll, so a passing test proves
// the event path.
func watchOptions(rec *reloads) Options {
	return Options{OnReload: rec.onReload, PollInterval: -1, Debounce: 10 * time.Millisecond}
}

// servesTurnCap reports whether m's live revision caps continuation turns
// at want steps.
func servesTurnCap(t *testing.T, m *Manager, want int) bool {
	t.Helper()
	res, err := m.Current().Eval(context.Background(), policy.HookBeforeTurn, []byte("continuation: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := res.Result.(*engine.TurnConfig)
	return cfg != nil && cfg.MaxSteps != nil && *cfg.MaxSteps == want
}

func TestWatch(t *testing.T) {
	capTo := func(n string) string { return strings.Replace(celTurn, "'3'", "'"+n+"'", 1) }
	for _, tc := range []struct {
		name   string
		layout func(t *testing.T, dir string)
		change func(t *testing.T, dir string)
		cap    int // the cap the changed rules serve; 0 means 4
	}{
		{
			name:   "write in place",
			layout: func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"turn.yaml": celTurn}) },
			change: func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"turn.yaml": capTo("4")}) },
		},
		{
			name:   "editor rename over",
			layout: func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"turn.yaml": celTurn}) },
			change: func(t *testing.T, dir string) {
				// What vim (backupcopy=no) and most IDEs do on save.
				writeFiles(t, dir, map[string]string{".turn.yaml.tmp": capTo("4")})
				if err := os.Rename(filepath.Join(dir, ".turn.yaml.tmp"), filepath.Join(dir, "turn.yaml")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "kubernetes configmap swap",
			layout: func(t *testing.T, dir string) {
				configMapDir(t, dir, "..2024_01", map[string]string{"turn.yaml": celTurn})
			},
			change: func(t *testing.T, dir string) {
				swapConfigMap(t, dir, "..2024_02", map[string]string{"turn.yaml": capTo("4")})
			},
		},
		{
			name:   "new file",
			layout: func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"turn.yaml": celTurn}) },
			change: func(t *testing.T, dir string) {
				// maxSteps takes the minimum of the two files' caps.
				writeFiles(t, dir, map[string]string{"zz-turn.yaml": strings.Replace(capTo("2"), "continuation-cap", "later-cap", 1)})
			},
			cap: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rules")
			tc.layout(t, dir)
			rec := newReloads()
			m := newTestManager(t, dir, watchOptions(rec))
			if !servesTurnCap(t, m, 3) {
				t.Fatal("initial revision does not cap at 3")
			}
			watch(t, m, rec)
			start := time.Now()
			tc.change(t, dir)
			rec.waitFor(t, "the new revision", func() bool { return servesTurnCap(t, m, cmp.Or(tc.cap, 4)) })
			t.Logf("reload latency (change → new revision serving): %v", time.Since(start))
		})
	}
}

func TestWatchBrokenEditKeepsServing(t *testing.T) {
	dir := rulesDir(t, map[string]string{"turn.yaml": celTurn})
	rec := newReloads()
	m := newTestManager(t, dir, watchOptions(rec))
	first := m.Current()
	watch(t, m, rec)
	writeFiles(t, dir, map[string]string{"turn.yaml": brokenTurn})
	rec.waitFor(t, "the failed reload", func() bool { return m.Status().LastError != nil })
	if m.Current() != first {
		t.Fatal("a broken edit replaced the live revision")
	}
	if e := m.Status().LastError[0]; e.Location.Line != 5 {
		t.Errorf("last error = %v, want line 5", e)
	}
}

func TestWatchDirectoryReplaced(t *testing.T) {
	dir := rulesDir(t, map[string]string{"turn.yaml": celTurn})
	rec := newReloads()
	// The poll re-adds the watch of a replaced directory.
	m := newTestManager(t, dir, Options{OnReload: rec.onReload, PollInterval: 20 * time.Millisecond, Debounce: 10 * time.Millisecond})
	watch(t, m, rec)
	staged := filepath.Join(filepath.Dir(dir), "rules.new")
	writeFiles(t, staged, map[string]string{"turn.yaml": strings.Replace(celTurn, "'3'", "'4'", 1)})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(staged, dir); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the replaced directory's revision", func() bool { return servesTurnCap(t, m, 4) })
	// And the re-added watch sees later edits.
	writeFiles(t, dir, map[string]string{"turn.yaml": strings.Replace(celTurn, "'3'", "'5'", 1)})
	rec.waitFor(t, "an edit after the replacement", func() bool { return servesTurnCap(t, m, 5) })
}

// TestWatchSymlinkSwap swaps a rules directory that is a symlink to a new
// target, as a deploy does (ln -s gens/g2 rules.new && mv -T rules.new
// rules), then edits the new target. The watch has no poll, so both are
// seen through fsnotify alone.
func TestWatchSymlinkSwap(t *testing.T) {
	base := t.TempDir()
	gen := func(name, steps string) string {
		target := filepath.Join(base, "gens", name)
		writeFiles(t, target, map[string]string{"turn.yaml": strings.Replace(celTurn, "'3'", "'"+steps+"'", 1)})
		return target
	}
	dir := filepath.Join(base, "rules")
	if err := os.Symlink(gen("g1", "3"), dir); err != nil {
		t.Fatal(err)
	}
	rec := newReloads()
	m := newTestManager(t, dir, watchOptions(rec))
	watch(t, m, rec)

	staged := filepath.Join(base, "rules.new")
	if err := os.Symlink(gen("g2", "4"), staged); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := os.Rename(staged, dir); err != nil { // mv -T: rename(2) over the old link
		t.Fatal(err)
	}
	rec.waitFor(t, "the swapped-in target's revision", func() bool { return servesTurnCap(t, m, 4) })
	t.Logf("swap latency (rename → new revision serving): %v", time.Since(start))
	writeFiles(t, filepath.Join(base, "gens", "g2"), map[string]string{"turn.yaml": strings.Replace(celTurn, "'3'", "'5'", 1)})
	rec.waitFor(t, "an edit in the new target", func() bool { return servesTurnCap(t, m, 5) })
}

// TestWatchCoalescesBursts holds the first rebuild while a burst of writes
// lands, then checks that the whole burst cost exactly one more rebuild.
func TestWatchCoalescesBursts(t *testing.T) {
	dir := rulesDir(t, map[string]string{"turn.yaml": celTurn})
	rec := newReloads()
	hold, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	opts := watchOptions(rec)
	opts.OnReload = func(result string, err error) {
		if result == ReloadSuccess {
			once.Do(func() { close(held); <-hold })
		}
		rec.onReload(result, err)
	}
	m := newTestManager(t, dir, opts)
	watch(t, m, rec)

	writeFiles(t, dir, map[string]string{"turn.yaml": strings.Replace(celTurn, "'3'", "'4'", 1)})
	select {
	case <-held:
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for the first rebuild")
	}
	const burst = 25
	for i := range burst {
		writeFiles(t, dir, map[string]string{"turn.yaml": strings.Replace(celTurn, "'3'", "'"+strconv.Itoa(100+i)+"'", 1)})
	}
	close(hold)
	rec.waitFor(t, "the burst's final revision", func() bool {
		return rec.count(ReloadSuccess) >= 2 && servesTurnCap(t, m, 100+burst-1)
	})
	if n := rec.count(ReloadSuccess); n != 2 {
		t.Errorf("%d rebuilds for one write and a burst of %d, want 2", n, burst)
	}
}

// TestWarningsAreLogged: a statically visible conflict does not stop a load
// or a reload, but the gateway's log names it where `turngate check` would.
func TestWarningsAreLogged(t *testing.T) {
	conflicting := "beforeTurn:\n  - name: fast\n    set:\n      model: '\"fast\"'\n  - name: big\n    set:\n      model: '\"big\"'\n"
	dir := rulesDir(t, map[string]string{"a.yaml": "beforeTurn:\n  - name: cap\n    set:\n      maxSteps: '5'\n"})
	var logs bytes.Buffer
	m, err := NewManager(dir, Options{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "rules warning") {
		t.Fatalf("a set without conflicts logged a warning:\n%s", logs.String())
	}
	writeFiles(t, dir, map[string]string{"b.yaml": conflicting})
	if changed, err := m.Reload(); err != nil || !changed {
		t.Fatalf("Reload = %v, %v; a warning must not reject a revision", changed, err)
	}
	want := "at=b.yaml:7:15" // relative to the rules directory
	if !strings.Contains(logs.String(), "rules warning") || !strings.Contains(logs.String(), "code=conflict_warning") || !strings.Contains(logs.String(), want) {
		t.Errorf("reload log lacks the conflict warning at %s:\n%s", want, logs.String())
	}
}

// TestReloadStatusTells covers what the log and Status say across a broken
// edit and its revert: the rejection names the file relative to the rules
// directory (not the absolute path it is mounted at), the revert logs that
// the rules are healthy again, and lastReload moves only when the revision
// changes while lastCheck moves on every attempt.
func TestReloadStatusTells(t *testing.T) {
	good := "beforeTurn:\n  - name: cap\n    set:\n      maxSteps: '5'\n"
	dir := rulesDir(t, map[string]string{"turn.yaml": good})
	var logs bytes.Buffer
	m, err := NewManager(dir, Options{}, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reload(); err != nil { // unchanged
		t.Fatal(err)
	}
	st := m.Status()
	if st.LastReload != nil || st.LastCheck == nil {
		t.Fatalf("after an unchanged reload: lastReload %v, lastCheck %v; want none and a time", st.LastReload, st.LastCheck)
	}

	writeFiles(t, dir, map[string]string{"turn.yaml": "beforeTurn:\n  - name: cap\n    when: turn.contiuation\n    set:\n      maxSteps: '5'\n"})
	if _, err := m.Reload(); err == nil {
		t.Fatal("a broken edit was accepted")
	}
	st = m.Status()
	if len(st.LastError) != 1 || st.LastError[0].Location.String() != "turn.yaml:3:15" {
		t.Errorf("lastError = %v, want it at turn.yaml:3:15", st.LastError)
	}
	if strings.Contains(logs.String(), dir+string(filepath.Separator)+"turn.yaml") || !strings.Contains(logs.String(), "turn.yaml:3:15") {
		t.Errorf("the rejection's log line should name turn.yaml:3:15, relative to the rules directory:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "healthy again") {
		t.Fatalf("healthy again before the fix:\n%s", logs.String())
	}

	writeFiles(t, dir, map[string]string{"turn.yaml": good}) // reverted
	if changed, err := m.Reload(); err != nil || changed {
		t.Fatalf("the revert: changed %v, %v; want unchanged and no error", changed, err)
	}
	if !strings.Contains(logs.String(), `msg="rules healthy again`) {
		t.Errorf("no log line says the rules are healthy again:\n%s", logs.String())
	}
	st = m.Status()
	if st.LastError != nil || st.LastReload != nil || st.LastCheck == nil {
		t.Errorf("after the revert: %+v; want no error and still no lastReload", st)
	}

	writeFiles(t, dir, map[string]string{"turn.yaml": good + "# changed\n"})
	if changed, err := m.Reload(); err != nil || !changed {
		t.Fatalf("a real change: %v, %v", changed, err)
	}
	st = m.Status()
	if st.LastReload == nil || !st.LastReload.Equal(*st.LastCheck) {
		t.Errorf("after a change: lastReload %v, lastCheck %v; want both the change's time", st.LastReload, st.LastCheck)
	}
	checked := *st.LastCheck
	if _, err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	if st2 := m.Status(); !st2.LastReload.Equal(*st.LastReload) || st2.LastCheck.Before(checked) {
		t.Errorf("an unchanged poll moved lastReload (%v → %v) or not lastCheck", st.LastReload, st2.LastReload)
	}
}
