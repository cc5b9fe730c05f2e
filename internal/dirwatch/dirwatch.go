// Package dirwatch calls a reload function whenever a directory changes:
// the watch behind the rules' hot reload and the live configuration.
package dirwatch

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Options configure Watch.
type Options struct {
	// Dir is the watched directory.
	Dir string
	// What names what Dir holds in logs ("rules directory", "config
	// file's directory").
	What string
	// Relevant reports whether an event on an entry of Dir can change what
	// is watched; nil means every event but a bare chmod.
	Relevant func(fsnotify.Event) bool
	// Debounce is how long Watch waits after an event before it reloads,
	// coalescing a burst of events into one reload.
	Debounce time.Duration
	// PollInterval is the backstop poll: reload this often whatever the
	// events; zero or negative disables it.
	PollInterval time.Duration
	// Logger receives the watch's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// Watch calls reload whenever opts.Dir changes, until ctx is done. It
// watches the directory itself, not its files, so editors'
// rename-on-save (write a temp file, rename it over the original) and
// Kubernetes ConfigMap updates (an atomic rename of the "..data" symlink)
// are seen like plain writes. It watches the parent directory too, for the
// directory's own entry: a directory that is a symlink swapped to a new
// target (ln -s gens/g2 rules.new && mv -T rules.new rules), or a
// directory renamed into place, is followed at once, and so are later
// edits in the new target. Events are coalesced: the first one opens a
// window of opts.Debounce, and one reload runs at its end. The poll
// reloads as a backstop and re-adds the watch when the directory was
// removed or replaced. Watch reloads once as soon as the watch is in
// place, so a change made before it started is not missed. Watch returns
// nil when ctx ends, or an error if it cannot create a watcher at all.
func Watch(ctx context.Context, opts Options, reload func()) error {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Relevant == nil {
		opts.Relevant = func(ev fsnotify.Event) bool { return ev.Op != fsnotify.Chmod }
	}
	// Absolute, so that the directory and its parent differ (the parent
	// of "." would be "." itself) and events name both alike.
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return fmt.Errorf("watching %s: %w", opts.What, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", opts.What, err)
	}
	defer w.Close()
	watching := addWatch(w, dir, opts)
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := w.Add(parent); err != nil {
			opts.Logger.Warn("cannot watch the parent of the "+opts.What+"; a swapped directory is seen by the poll only", "dir", parent, "error", err)
		}
	}
	// A change made before the watch was in place raised no event.
	reload()

	var poll <-chan time.Time
	if opts.PollInterval > 0 {
		t := time.NewTicker(opts.PollInterval)
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
			case name == dir && ev.Has(fsnotify.Create):
				// A directory or symlink was put in place of the
				// directory: watch what the name now leads to.
				watching = addWatch(w, dir, opts)
			case name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename):
				// The directory itself went away; a Create or the poll
				// re-adds it.
				watching = false
			case parent != dir && filepath.Dir(name) == parent && name != dir:
				continue // a sibling of the directory
			}
			if !pending && (name == dir || opts.Relevant(ev)) {
				pending = true
				debounce.Reset(opts.Debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			opts.Logger.Warn(opts.What+" watch error", "dir", dir, "error", err)
		case <-debounce.C:
			pending = false
			reload()
		case <-poll:
			if !watching {
				watching = addWatch(w, dir, opts)
			}
			reload()
		}
	}
}

// addWatch starts watching dir and reports whether it could.
func addWatch(w *fsnotify.Watcher, dir string, opts Options) bool {
	_ = w.Remove(dir) // a stale watch of a replaced directory, if any
	if err := w.Add(dir); err != nil {
		opts.Logger.Warn("cannot watch the "+opts.What+"; polling only until it can", "dir", dir, "error", err)
		return false
	}
	return true
}
