package ruleset

import (
	"time"

	"github.com/turngate/turngate/policy"
)

// ReloadLog is the status of a hot-reloaded source's reload attempts —
// when one last looked and last changed it, the last rejection, the
// counts and the last HistorySize accepted and rejected attempts — kept
// alike for the rules (Manager) and the config file
// (gateway/liveconfig). It holds no lock: its owner serialises the calls.
type ReloadLog struct {
	lastReload, lastCheck time.Time
	lastErr               policy.Errors
	// lastFailed identifies the rejected candidate behind lastErr, so the
	// same candidate read again is not rejected (and counted) again.
	lastFailed string
	ok, failed int64
	// history is oldest first.
	history []Reload
}

// Unchanged notes an attempt at now that found the live source again; it
// reports whether that healed a rejection (the broken edit reverted).
func (l *ReloadLog) Unchanged(now time.Time) (healed bool) {
	return l.note(now, Reload{}, nil)
}

// Accepted notes an attempt at now whose candidate rev became live; it
// reports whether that healed a rejection.
func (l *ReloadLog) Accepted(now time.Time, rev string) (healed bool) {
	l.ok++
	l.lastReload = now
	return l.note(now, Reload{Time: now, Accepted: true, Revision: rev}, nil)
}

// Rejected notes an attempt at now whose candidate, identified by id
// (LastFailed), was refused with errs; rev is its revision in the history
// ("" when it could not be read).
func (l *ReloadLog) Rejected(now time.Time, id, rev string, errs policy.Errors) {
	l.failed++
	l.note(now, Reload{Time: now, Revision: rev, Errors: errs}, errs)
	l.lastFailed = id
}

func (l *ReloadLog) note(now time.Time, r Reload, errs policy.Errors) (healed bool) {
	healed = errs == nil && l.lastErr != nil
	l.lastCheck = now
	l.lastErr, l.lastFailed = errs, ""
	if !r.Time.IsZero() {
		if len(l.history) == HistorySize {
			l.history = append(l.history[:0], l.history[1:]...)
		}
		l.history = append(l.history, r)
	}
	return healed
}

// LastFailed returns the id of the rejected candidate behind LastError
// ("" when the last attempt was not rejected) and its errors.
func (l *ReloadLog) LastFailed() (string, policy.Errors) { return l.lastFailed, l.lastErr }

// LastError is the last attempt's diagnostics when it was rejected.
func (l *ReloadLog) LastError() policy.Errors { return l.lastErr }

// Counts returns how many attempts were accepted and rejected.
func (l *ReloadLog) Counts() (accepted, rejected int64) { return l.ok, l.failed }

// History returns the kept attempts, newest first.
func (l *ReloadLog) History() []Reload {
	out := make([]Reload, 0, len(l.history))
	for i := len(l.history) - 1; i >= 0; i-- {
		out = append(out, l.history[i])
	}
	return out
}

// LastReload is when an attempt last changed the live source (nil until
// one has).
func (l *ReloadLog) LastReload() *time.Time { return nonZero(l.lastReload) }

// LastCheck is when an attempt last looked, whatever came of it (nil
// until one has).
func (l *ReloadLog) LastCheck() *time.Time { return nonZero(l.lastCheck) }

func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
