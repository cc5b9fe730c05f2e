package ruleset

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"

	"github.com/turngate/turngate/internal/dirwatch"
)

// Watch reloads the rule set whenever the directory changes, until ctx is
// done (dirwatch.Watch: editors' rename-on-save, Kubernetes ConfigMap
// swaps and a directory swapped whole are followed; events are coalesced
// over Options.Debounce; Options.PollInterval is the backstop poll). It
// reloads once as soon as the watch is in place, so a change made before
// it started is not missed. Reload errors are logged and kept for Status;
// Watch returns nil when ctx ends, or an error if it cannot create a
// watcher at all. Call it once per Manager.
func (m *Manager) Watch(ctx context.Context) error {
	return dirwatch.Watch(ctx, dirwatch.Options{Dir: m.dir, What: "rules directory", Relevant: relevantEvent,
		Debounce: m.opts.Debounce, PollInterval: m.opts.PollInterval, Logger: m.logger},
		func() { _, _ = m.Reload() }) // Reload logs and records its outcome
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
