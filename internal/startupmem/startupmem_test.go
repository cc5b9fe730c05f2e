//go:build linux

package startupmem

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// rssFile is the process's resident file-backed memory (RssFile), bytes.
func rssFile(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseShrinksResidentFilePages checks that Release reclaims the
// test binary's pages the test does not run (the resident file-backed
// memory falls) and that the process keeps working afterwards.
func TestReleaseShrinksResidentFilePages(t *testing.T) {
	before := rssFile(t)
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := rssFile(t)
	if n <= 0 || after >= before {
		t.Fatalf("Release asked for %d bytes; RssFile %d → %d bytes, want it lower", n, before, after)
	}
	t.Logf("RssFile %d KiB → %d KiB (%d KiB of mappings)", before>>10, after>>10, n>>10)
	// Code and data paged out come back from the file.
	if got := strings.Repeat("ab", 3); got != "ababab" {
		t.Fatalf("after Release: %q", got)
	}
}

func TestParseMapping(t *testing.T) {
	for _, tc := range []struct {
		line string
		want mapping
		ok   bool
	}{
		{"00400000-01a00000 r-xp 00000000 fd:01 1234   /usr/bin/turngate", mapping{0x400000, 0x1a00000, "r-xp", "/usr/bin/turngate"}, true},
		{"7f00-8f00 r--p 00000000 fd:01 1234 /tmp/a b (deleted)", mapping{0x7f00, 0x8f00, "r--p", "/tmp/a b (deleted)"}, true},
		{"7f00-8f00 rw-p 00000000 00:00 0", mapping{}, false},
		{"zz-8f00 r--p 0 0 0 /x", mapping{}, false},
		{"8f00-7f00 r--p 0 0 0 /x", mapping{}, false},
	} {
		got, ok := parseMapping(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseMapping(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
	for perms, want := range map[string]bool{"r-xp": true, "r--p": true, "rw-p": false, "rwxp": false, "---p": false} {
		if readOnly(perms) != want {
			t.Errorf("readOnly(%q) = %v", perms, !want)
		}
	}
}
