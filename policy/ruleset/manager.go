package ruleset

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turngate/turngate/policy"
)

// Manager keeps the live Revision of a rules directory. Current is lock-free;
// Reload and Watch build candidates beside the live revision and swap a good
// one in atomically, keeping the last good revision when a candidate fails.
type Manager struct {
	dir string
	// fsys is what the manager reads: dir on disk, or an embedded rule
	// set (NewManagerFS), which never changes and is not watched.
	fsys   fs.FS
	opts   Options
	logger *slog.Logger

	cur atomic.Pointer[Revision]

	// reloadMu serialises reloads, so two candidates never race to swap.
	reloadMu sync.Mutex

	// mu guards reloads, the reload attempts' status.
	mu      sync.Mutex
	reloads ReloadLog
}

// HistorySize is how many reloads Status.Reloads keeps: the newest
// accepted and rejected attempts (an unchanged one is not kept).
const HistorySize = 20

// Reload is one reload attempt that changed or was refused, for Status.
type Reload struct {
	Time time.Time `json:"time"`
	// Accepted is true when the candidate became the live revision.
	Accepted bool `json:"accepted"`
	// Revision is the candidate's id (empty when its files could not be
	// read).
	Revision string `json:"revision,omitempty"`
	// Errors are a rejected candidate's positioned diagnostics.
	Errors policy.Errors `json:"errors,omitempty"`
}

// NewManager loads dir and returns a Manager serving it. A directory that
// does not compile, or whose tests fail (see Options.Tests), is an error (a
// policy.Errors with every diagnostic or failing test): startup fails hard
// rather than serving without rules. A nil logger means
// opts.Logger, then slog.Default().
func NewManager(dir string, opts Options, logger *slog.Logger) (*Manager, error) {
	return NewManagerFS(dirFS(dir), dir, opts, logger)
}

// NewManagerFS is NewManager over a file system whose top directory holds
// the rules; name labels it in logs and Status. Diagnostics (the startup
// error, reload errors in logs and Status, warnings) name files relative
// to the directory, as rule ids do: "tools.rego:3:1", whatever path the
// directory is mounted at. With an embedded rule set (rules.FS) Reload
// finds nothing new and Watch must not be called.
func NewManagerFS(fsys fs.FS, name string, opts Options, logger *slog.Logger) (*Manager, error) {
	dir := name
	if logger != nil {
		opts.Logger = logger
	}
	opts = opts.withDefaults()
	snap, errs := readSnapshot(fsys, "")
	if errs == nil {
		var rev *Revision
		if rev, errs = build(snap, opts); errs == nil {
			m := &Manager{dir: filepath.Clean(dir), fsys: fsys, opts: opts, logger: opts.Logger}
			m.cur.Store(rev)
			m.logger.Info("rules loaded", "dir", dir, "revision", rev.id, "files", len(rev.infos))
			m.logWarnings(rev)
			return m, nil
		}
	}
	return nil, fmt.Errorf("loading rules from %s: %w", dir, errs)
}

// Current returns the live revision. A turn calls it once and uses the
// result for all its hooks.
func (m *Manager) Current() *Revision { return m.cur.Load() }

// Reload rebuilds the rule set from the directory now (the SIGHUP and admin
// API path; Watch calls it too). Unchanged files (same revision id) rebuild
// nothing and report changed == false. A candidate that fails to read or
// compile is rejected: the live revision stays, and err is a policy.Errors
// also kept for Status. A candidate whose tests fail (see Options.Tests)
// is rejected the same way. A candidate identical to the last rejected one is
// not recompiled; its errors are returned again.
func (m *Manager) Reload() (changed bool, err error) {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	live := m.cur.Load()
	snap, errs := readSnapshot(m.fsys, "")
	switch {
	case errs != nil:
		return false, m.rejected("", errs)
	case snap.id == live.id:
		m.finish(ReloadUnchanged, nil, "")
		return false, nil
	}
	m.mu.Lock()
	failedID, lastErr := m.reloads.LastFailed()
	m.mu.Unlock()
	if knownBad := snap.id == failedID; knownBad {
		return false, lastErr
	}
	rev, errs := build(snap, m.opts)
	if errs != nil {
		return false, m.rejected(snap.id, errs)
	}
	m.cur.Store(rev)
	m.logger.Info("rules reloaded", "dir", m.dir, "revision", rev.id, "previous", live.id, "files", len(rev.infos))
	m.logWarnings(rev)
	m.finish(ReloadSuccess, nil, rev.id)
	return true, nil
}

// logWarnings logs each warning of a revision that is now live (two rules
// setting a field to different constants, …), as `turngate check` prints
// them: they do not stop a load, but an operator should see them.
func (m *Manager) logWarnings(rev *Revision) {
	for _, w := range rev.Warnings() {
		m.logger.Warn("rules warning", "revision", rev.id, "code", w.Code, "at", w.Location.String(), "rule", w.Rule, "field", w.Field, "message", w.Message)
	}
}

// build compiles a snapshot into a revision and runs its tests as
// opts.Tests asks; a revision that fails either is not built.
func build(snap *snapshot, opts Options) (*Revision, policy.Errors) {
	rev, errs := compile(snap, opts)
	if errs != nil {
		return nil, errs
	}
	if errs := rev.checkTests(context.Background()); errs != nil {
		return nil, errs
	}
	return rev, nil
}

// rejected records a failed candidate (id may be empty when it could not
// be read) and returns its errors.
func (m *Manager) rejected(id string, errs policy.Errors) error {
	m.logger.Error("rules reload failed; keeping the last good revision",
		"dir", m.dir, "revision", m.cur.Load().id, "errors", len(errs), "error", errs.Error())
	m.finish(ReloadFailure, errs, id)
	return errs
}

// finish updates the status after a reload attempt and reports it to
// Options.OnReload. The first good attempt after a rejected one (the fix
// reloaded, or the broken edit reverted, which changes nothing) logs that
// the rules are healthy again: the rejection's error line would otherwise
// be the last word in the log.
//
// id is the candidate's revision id (the accepted one, or the rejected one).
func (m *Manager) finish(result string, errs policy.Errors, id string) {
	now := time.Now()
	m.mu.Lock()
	var healed bool
	switch result {
	case ReloadSuccess:
		healed = m.reloads.Accepted(now, id)
	case ReloadFailure:
		m.reloads.Rejected(now, id, id, errs)
	default:
		healed = m.reloads.Unchanged(now)
	}
	m.mu.Unlock()
	if healed {
		m.logger.Info("rules healthy again: the rejected candidate is gone", "dir", m.dir, "revision", m.cur.Load().id, "result", result)
	}
	if m.opts.OnReload != nil {
		var err error
		if errs != nil {
			err = errs
		}
		m.opts.OnReload(result, err)
	}
}

// Status is the state of a Manager, for the admin API.
type Status struct {
	Dir      string     `json:"dir"`
	Revision string     `json:"revision"`
	Files    []FileInfo `json:"files"`
	LoadedAt time.Time  `json:"loadedAt"`
	// LastReload is when a reload last changed the live revision (absent
	// until one has): an unchanged or rejected attempt leaves it.
	LastReload *time.Time `json:"lastReload,omitempty"`
	// LastCheck is when a reload last looked at the directory, whatever
	// came of it (a watch event, a poll, SIGHUP, the admin API).
	LastCheck *time.Time `json:"lastCheck,omitempty"`
	// LastError is the diagnostics of the last attempt when it failed; a
	// later successful or unchanged reload clears it.
	LastError     policy.Errors `json:"lastError,omitempty"`
	ReloadsOK     int64         `json:"reloadsOk"`
	ReloadsFailed int64         `json:"reloadsFailed"`
	// Reloads are the last HistorySize accepted and rejected reloads of
	// this replica, newest first.
	Reloads []Reload `json:"reloads"`
	// Tests are the live revision's rule tests, run when it was built.
	Tests TestSummary `json:"tests"`
}

// Status returns the live revision and the reload history.
func (m *Manager) Status() Status {
	rev := m.cur.Load()
	m.mu.Lock()
	defer m.mu.Unlock()
	ok, failed := m.reloads.Counts()
	return Status{
		Dir:           m.dir,
		Revision:      rev.id,
		Files:         rev.Files(),
		LoadedAt:      rev.loadedAt,
		LastReload:    m.reloads.LastReload(),
		LastCheck:     m.reloads.LastCheck(),
		LastError:     m.reloads.LastError(),
		ReloadsOK:     ok,
		ReloadsFailed: failed,
		Reloads:       m.reloads.History(),
		Tests:         rev.tests,
	}
}
