package ruleset

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch reloads the rule set whenever the directory changes, until ctx is
// done. It watches the directory itself, not its files, so editors'
// rename-on-save (write a temp file, rename it over the original) and
// Kubernetes ConfigMap updates (an atomic rename of the "..data" symlink)
// are seen like plain writes. It watches the parent directory too, for the
// directory's own entry: a rules directory that is a symlink swapped to a
// new target (ln -s gens/g2 rules.new && mv -T rules.new rules), or a
// directory renamed into place, is followed at once, and so are later
// edits in the new target. Events are coalesced: the first one opens a
// window of Options.Debounce, and one reload runs at its end. A slow poll
// (Options.PollInterval) reloads as a backstop and re-adds the watch when
// the directory was removed or replaced. Watch reloads once as soon as the
// watch is in place, so a change made before it started is not missed.
// Reload errors are logged and kept
// for Status; Watch returns nil when ctx ends, or an error if it cannot
// create a watcher at all. Call it once per Manager.
func (m *Manager) Watch(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching rules: %w", err)
	}
	defer w.Close()
	watching := m.addWatch(w)
	parent := filepath.Dir(m.dir)
	if parent != m.dir {
		if err := w.Add(parent); err != nil {
			m.logger.Warn("cannot watch the rules directory's parent; a swapped directory is seen by the poll only", "dir", parent, "error", err)
		}
	}
	// A change made before the watch was in place raised no event.
	_, _ = m.Reload()

	var poll <-chan time.Time
	if m.opts.PollInterval > 0 {
		t := time.NewTicker(m.opts.PollInterval)
		defer t.Stop()
		poll = t.C
	}
	debounce := time.NewTimer(time.Hour) // armed by the first event
	debounce.Stop()
	defer debounce.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Clean(ev.Name)
			switch {
			case name == m.dir && ev.Has(fsnotify.Create):
				// A directory or symlink was put in place of the
				// directory: watch what the name now leads to.
				watching = m.addWatch(w)
			case name == m.dir && ev.Has(fsnotify.Remove|fsnotify.Rename):
				// The directory itself went away; a Create or the poll
				// re-adds it.
				watching = false
			case filepath.Dir(name) == parent && name != m.dir:
				continue // a sibling of the rules directory
			}
			if !pending && (name == m.dir || relevantEvent(ev)) {
				pending = true
				debounce.Reset(m.opts.Debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			m.logger.Warn("rules watch error", "dir", m.dir, "error", err)
		case <-debounce.C:
			pending = false
			_, _ = m.Reload() // Reload logs and records its outcome
		case <-poll:
			if !watching {
				watching = m.addWatch(w)
			}
			_, _ = m.Reload()
		}
	}
}

// addWatch starts watching the directory and reports whether it could.
func (m *Manager) addWatch(w *fsnotify.Watcher) bool {
	_ = w.Remove(m.dir) // a stale watch of a replaced directory, if any
	if err := w.Add(m.dir); err != nil {
		m.logger.Warn("cannot watch rules directory; polling only until it can", "dir", m.dir, "error", err)
		return false
	}
	return true
}

// relevantEvent reports whether ev can change the rule set: not a bare
// chmod, and not an editor's swap, lock or backup file. Kubernetes'
// "..data" entries are hidden names but relevant.
func relevantEvent(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	base := filepath.Base(ev.Name)
	return strings.HasPrefix(base, "..") || !skipName(base)
}
