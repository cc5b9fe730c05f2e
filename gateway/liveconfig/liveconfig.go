// Package liveconfig reloads the gateway's configuration file while it
// serves: on a change of the file (watched) or on request (SIGHUP), the
// file is loaded and validated exactly as at startup (gateway/config),
// compared with the live configuration, and applied when what changed may
// change live (LiveFields: API keys, JWT settings, limits, agents' tool
// lists). A change to anything else is refused whole with the field it
// names ("listen changed: needs a restart"), and a file that does not load
// keeps the last good configuration; either is reported with its
// file:line:col in Status. Turns take the configuration once, when they
// start (the gateway swaps it behind an atomic pointer), so a running turn
// finishes on the configuration it started with.
package liveconfig

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/internal/dirwatch"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

// Reload results, as Options.OnReload and the metric
// turngate_config_reloads_total name them.
const (
	ReloadAccepted  = "accepted"  // the edited file is the live configuration
	ReloadRejected  = "rejected"  // the file was refused; the last good configuration serves
	ReloadUnchanged = "unchanged" // the file's text is the live configuration's
)

// Diagnostic codes of a rejected reload (policy.Error.Code).
const (
	// CodeInvalid is a file that does not load or validate as at startup.
	CodeInvalid = "config_invalid"
	// CodeRestart is a change to a field that needs a restart.
	CodeRestart = "restart_required"
)

// Default watch timings.
const (
	// DefaultPollInterval is the backstop poll, as the rules': it catches
	// what the file watch misses (network filesystems, a file replaced
	// through a symlink elsewhere). A poll of an unchanged file reads and
	// hashes it, nothing more.
	DefaultPollInterval = 5 * time.Second
	// DefaultDebounce coalesces an editor's burst of events into one
	// reload.
	DefaultDebounce = 100 * time.Millisecond
)

// Options configure a Manager.
type Options struct {
	// Apply makes a candidate live (the gateway's ApplyConfig). It is
	// called only with a candidate that loaded, passed Check and differs
	// from the live configuration in LiveFields only; an error rejects the
	// candidate. Required.
	Apply func(*config.Config) error
	// Check, if set, makes the checks and adjustments the gateway makes
	// after config.Load at startup (a --listen flag overriding the file's,
	// a public listen address without credentials); its error rejects the
	// candidate and should be positioned (config.ErrorAt).
	Check func(*config.Config) error
	// OnReload, if set, is told of every reload's result (the metrics):
	// ReloadAccepted, ReloadRejected (err says why) or ReloadUnchanged.
	// The same rejected text read again is not reported again.
	OnReload func(result string, err error)
	// PollInterval is Watch's backstop poll; zero means
	// DefaultPollInterval, negative disables it.
	PollInterval time.Duration
	// Debounce is how long Watch waits after an event before it reloads;
	// zero means DefaultDebounce.
	Debounce time.Duration
	// Logger receives the reloads' log lines; nil means slog.Default().
	Logger *slog.Logger
}

// Manager keeps the live configuration of one file.
type Manager struct {
	path string
	opts Options
	log  *slog.Logger

	// reloadMu serialises reloads.
	reloadMu sync.Mutex

	// mu guards the fields below.
	mu       sync.Mutex
	live     *config.Config
	loadedAt time.Time
	// reloads is the attempts' status; its LastFailed is the revision of
	// the rejected text, so a poll of the same broken file is not
	// rejected (and counted) again.
	reloads ruleset.ReloadLog
}

// New returns a Manager of the file at path whose live configuration is
// live, the configuration the gateway started with (config.Load of path).
func New(path string, live *config.Config, opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Debounce == 0 {
		opts.Debounce = DefaultDebounce
	}
	return &Manager{path: path, opts: opts, log: opts.Logger, live: live, loadedAt: time.Now()}
}

// Current returns the live configuration.
func (m *Manager) Current() *config.Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live
}

// Reload loads the file now and applies it (the SIGHUP path; Watch calls
// it too). A file whose text is the live one's changes nothing (changed
// false). A file that does not load or pass Options.Check, that changes a
// field needing a restart (Diff), or that Options.Apply refuses is
// rejected: the live configuration stays, and err is its policy.Errors,
// also kept for Status. The same rejected text read again is not
// reloaded; its errors are returned again.
func (m *Manager) Reload() (changed bool, err error) {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	m.mu.Lock()
	live := m.live
	lastFailed, lastErr := m.reloads.LastFailed()
	m.mu.Unlock()

	data, err := os.ReadFile(m.path)
	if err != nil {
		err = fmt.Errorf("reading config: %w", err)
		if unreadable := "unreadable: " + err.Error(); unreadable != lastFailed {
			return false, m.rejected(unreadable, policy.CodeIO, err)
		}
		return false, lastErr
	}
	rev := config.TextRevision(data)
	switch rev {
	case live.Revision():
		m.finish(ReloadUnchanged, nil, "", nil)
		return false, nil
	case lastFailed:
		return false, lastErr
	}
	next, err := config.Load(m.path)
	if err != nil {
		return false, m.rejected(rev, CodeInvalid, err)
	}
	rev = next.Revision() // the text Load read
	if m.opts.Check != nil {
		if err := m.opts.Check(next); err != nil {
			return false, m.rejected(rev, CodeInvalid, err)
		}
	}
	if err := Diff(live, next); err != nil {
		return false, m.rejected(rev, CodeRestart, err)
	}
	if err := m.opts.Apply(next); err != nil {
		return false, m.rejected(rev, CodeInvalid, err)
	}
	m.log.Info("config reloaded", "file", m.path, "revision", rev, "previous", live.Revision())
	m.finish(ReloadAccepted, nil, rev, next)
	return true, nil
}

// rejected records a refused candidate, rev the revision of its text (or
// "unreadable: " and the error, for a file that could not be read), and
// returns its diagnostics.
func (m *Manager) rejected(rev, code string, err error) error {
	errs := diagnostics(m.path, code, err)
	m.log.Error("config reload rejected; keeping the last good configuration",
		"file", m.path, "revision", m.Current().Revision(), "errors", len(errs), "error", errs.Error())
	m.finish(ReloadRejected, errs, rev, nil)
	return errs
}

// finish updates the status after a reload attempt, next becoming the
// live configuration of an accepted one in the same step (Status never
// shows the new revision without its reload), and reports the result to
// Options.OnReload.
func (m *Manager) finish(result string, errs policy.Errors, rev string, next *config.Config) {
	now := time.Now()
	m.mu.Lock()
	var healed bool
	switch result {
	case ReloadAccepted:
		m.live, m.loadedAt = next, now
		healed = m.reloads.Accepted(now, rev)
	case ReloadRejected:
		histRev := rev
		if !strings.HasPrefix(rev, "sha256:") {
			histRev = "" // the file could not be read
		}
		m.reloads.Rejected(now, rev, histRev, errs)
	default:
		healed = m.reloads.Unchanged(now)
	}
	m.mu.Unlock()
	if healed {
		m.log.Info("config healthy again: the rejected file is gone", "file", m.path, "revision", m.Current().Revision())
	}
	if m.opts.OnReload != nil {
		var err error
		if errs != nil {
			err = errs
		}
		m.opts.OnReload(result, err)
	}
}

// diagnostics returns err, an error of config.Load, Options.Check or Diff
// (config.FileErrors, joined) or of Options.Apply, as one positioned
// diagnostic per error it joins; one without a position is at the file.
// A restart error's code is CodeRestart, any other's code.
func diagnostics(file, code string, err error) policy.Errors {
	var out policy.Errors
	for _, e := range config.Flatten(err) {
		d := &policy.Error{Code: code, Location: policy.Location{File: file}, Message: e.Error()}
		if fe := (*config.FileError)(nil); errors.As(e, &fe) {
			d.Location = policy.Location{File: fe.File, Line: fe.Line, Column: fe.Column}
			d.Message = fe.Err.Error()
		}
		if re := (*RestartError)(nil); errors.As(e, &re) {
			d.Code, d.Field = CodeRestart, re.Path
		}
		out = append(out, d)
	}
	return out
}

// Watch reloads the configuration whenever its file changes, until ctx is
// done: it watches the file's directory (dirwatch.Watch, as the rules'
// hot reload does), so an editor's rename-on-save and a Kubernetes
// ConfigMap's symlink swap are seen like a write, with
// Options.PollInterval as the backstop. Watch returns nil when ctx ends,
// or an error if it cannot create a watcher at all.
func (m *Manager) Watch(ctx context.Context) error {
	name := filepath.Base(m.path)
	return dirwatch.Watch(ctx, dirwatch.Options{Dir: filepath.Dir(m.path), What: "config file's directory",
		Relevant: func(ev fsnotify.Event) bool {
			base := filepath.Base(ev.Name)
			return ev.Op != fsnotify.Chmod && (base == name || strings.HasPrefix(base, ".."))
		},
		Debounce: m.opts.Debounce, PollInterval: m.opts.PollInterval, Logger: m.log},
		func() { _, _ = m.Reload() }) // Reload logs and records its outcome
}

// Status is the state of a Manager, for the admin API
// (GET /v1/admin/config).
type Status struct {
	// File is the config file.
	File string `json:"file"`
	// Revision identifies the live configuration's text: "sha256:…" of
	// the file as loaded.
	Revision string `json:"revision"`
	// LoadedAt is when the live configuration was loaded (at start or by
	// the last accepted reload).
	LoadedAt time.Time `json:"loadedAt"`
	// LastReload is when a reload last changed the live configuration
	// (absent until one has).
	LastReload *time.Time `json:"lastReload,omitempty"`
	// LastCheck is when a reload last looked at the file, whatever came
	// of it (a watch event, a poll, SIGHUP).
	LastCheck *time.Time `json:"lastCheck,omitempty"`
	// LastError is the positioned diagnostics of the last attempt when it
	// was rejected; a later accepted or unchanged reload clears it.
	LastError       policy.Errors `json:"lastError,omitempty"`
	ReloadsOK       int64         `json:"reloadsOk"`
	ReloadsRejected int64         `json:"reloadsRejected"`
	// Reloads are the last ruleset.HistorySize accepted and rejected
	// reloads, newest first.
	Reloads []ruleset.Reload `json:"reloads"`
	// LiveFields are the fields a reload changes live; changing any other
	// needs a restart.
	LiveFields []string `json:"liveFields"`
}

// Status returns the live configuration's revision and the reload
// history.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	ok, rejected := m.reloads.Counts()
	return Status{File: m.path, Revision: m.live.Revision(), LoadedAt: m.loadedAt,
		LastReload: m.reloads.LastReload(), LastCheck: m.reloads.LastCheck(), LastError: m.reloads.LastError(),
		ReloadsOK: ok, ReloadsRejected: rejected, Reloads: m.reloads.History(), LiveFields: LiveFields}
}
