package httpguard

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/fakeclock"
)

func TestFailuresAreSampled(t *testing.T) {
	var buf bytes.Buffer
	c := fakeclock.New(time.Unix(1_700_000_000, 0))
	f := NewFailures(slog.New(slog.NewTextHandler(&buf, nil)), 0, c.Now)
	for range 25 {
		f.Fail(context.Background(), "192.0.2.1", "invalid API key", "GET /v1/approvals")
	}
	if n := strings.Count(buf.String(), "level=INFO msg=\"authentication failed\""); n != FailureLogBurst {
		t.Fatalf("%d lines logged at info in a window, want %d:\n%s", n, FailureLogBurst, buf.String())
	}
	buf.Reset()
	c.Advance(FailureWindow)
	f.Fail(context.Background(), "192.0.2.1", "invalid API key", "GET /v1/approvals")
	if line := buf.String(); !strings.Contains(line, "unloggedFailures=15") || !strings.Contains(line, "source=192.0.2.1") || !strings.Contains(line, "failuresThisMinute=1") {
		t.Errorf("the next window's first line %q does not count the 15 left out", line)
	}
	if _, ok := f.Throttled("192.0.2.1"); ok {
		t.Error("throttled without a limit")
	}
}

func TestFailuresThrottlePerSource(t *testing.T) {
	c := fakeclock.New(time.Unix(1_700_000_000, 0))
	f := NewFailures(slog.New(slog.DiscardHandler), 3, c.Now)
	for range 2 {
		f.Fail(context.Background(), "192.0.2.1", "invalid API key", "x")
	}
	if _, ok := f.Throttled("192.0.2.1"); ok {
		t.Fatal("throttled below the limit")
	}
	f.Fail(context.Background(), "192.0.2.1", "invalid API key", "x")
	c.Advance(20 * time.Second)
	wait, ok := f.Throttled("192.0.2.1")
	if !ok || wait != 40*time.Second {
		t.Errorf("Throttled = %v, %v; want true until the minute ends (40s)", wait, ok)
	}
	if _, ok := f.Throttled("192.0.2.2"); ok {
		t.Error("another address was throttled")
	}
	c.Advance(40 * time.Second)
	if _, ok := f.Throttled("192.0.2.1"); ok {
		t.Error("still throttled in the next minute")
	}
}

// TestFailuresThrottleIPv6Blocks: an IPv6 guesser's failures count for its
// whole /64, so a new address for each try is still throttled; the next
// /64 and IPv4 addresses are not.
func TestFailuresThrottleIPv6Blocks(t *testing.T) {
	f := NewFailures(slog.New(slog.DiscardHandler), 3, nil)
	for _, src := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::3"} {
		f.Fail(context.Background(), src, "invalid API key", "x")
	}
	for _, tc := range []struct {
		source string
		want   bool
	}{
		{"2001:db8:1:2::99", true},
		{"2001:db8:1:3::1", false},
		{"::ffff:192.0.2.1", false},
		{"192.0.2.1", false},
		{"not an address", false},
	} {
		if _, ok := f.Throttled(tc.source); ok != tc.want {
			t.Errorf("Throttled(%q) = %v, want %v", tc.source, ok, tc.want)
		}
	}
}
