package httpguard

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// FailureWindow is the period of the failure log's sampling and of the
// per-source throttle: one minute, the unit operators read rates in.
const FailureWindow = time.Minute

// FailureLogBurst is how many failed authentications each window logs at
// info; the rest are counted, and the next logged line says how many were
// left out. A guessing client thus shows in the log without flooding it.
const FailureLogBurst = 10

// maxFailureSources bounds the sources tracked in one window (about 100
// bytes each): a flood from more addresses than this is still logged and
// counted, but the sources beyond it are not throttled until the window
// turns.
const maxFailureSources = 100_000

// Failures records failed authentications: sampled log lines at info, and
// (with a limit) the sources that failed too often in the current window.
// It is safe for concurrent use.
type Failures struct {
	log *slog.Logger
	// limit is how many failures a source may have in a window before
	// its requests are refused; 0 never refuses.
	limit int
	now   func() time.Time

	mu      sync.Mutex
	start   time.Time // of the current window
	logged  int       // lines logged in the window
	skipped int       // failures not logged since the last line
	sources map[string]int
}

// NewFailures returns a record that logs to log and, when limit is
// positive, throttles a source after limit failures in a window. now is
// the clock (nil: time.Now).
func NewFailures(log *slog.Logger, limit int, now func() time.Time) *Failures {
	if now == nil {
		now = time.Now
	}
	return &Failures{log: log, limit: limit, now: now, sources: map[string]int{}}
}

// Source is the address a request's failures count against: the client IP
// of the connection (not a forwarded-for header, which the client writes).
func Source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// SourceKey is what a source's failures and keyless connections count
// against: an IPv6 address's /64, the block one host is usually given (a
// guesser would otherwise take a new address for each try, and fill
// maxFailureSources), and any other source as it is.
func SourceKey(source string) string {
	a, err := netip.ParseAddr(source)
	if err != nil || !a.Is6() || a.Is4In6() {
		return source
	}
	p, err := a.Prefix(64)
	if err != nil {
		return source
	}
	return p.String()
}

// turn starts a new window when the current one has passed; mu is held.
func (f *Failures) turn(now time.Time) {
	if now.Sub(f.start) < FailureWindow {
		return
	}
	f.start, f.logged = now, 0
	clear(f.sources)
}

// Fail records a failed authentication from source, of kind (the 401's
// message) at where (method and path, or a WebSocket frame).
func (f *Failures) Fail(ctx context.Context, source, kind, where string) {
	f.mu.Lock()
	f.turn(f.now())
	key := SourceKey(source)
	if n, ok := f.sources[key]; ok || len(f.sources) < maxFailureSources {
		f.sources[key] = n + 1
	}
	count := f.sources[key]
	logIt := f.logged < FailureLogBurst
	skipped := f.skipped
	if logIt {
		f.logged++
		f.skipped = 0
	} else {
		f.skipped++
	}
	f.mu.Unlock()
	if logIt {
		f.log.InfoContext(ctx, "authentication failed", "source", source, "reason", kind, "at", where,
			"failuresThisMinute", count, "unloggedFailures", skipped)
	}
}

// Throttled reports whether source (with the rest of its IPv6 /64) has
// used up its failures of the current window, and when the window ends.
func (f *Failures) Throttled(source string) (time.Duration, bool) {
	if f.limit <= 0 {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	f.turn(now)
	if f.sources[SourceKey(source)] < f.limit {
		return 0, false
	}
	return f.start.Add(FailureWindow).Sub(now), true
}
