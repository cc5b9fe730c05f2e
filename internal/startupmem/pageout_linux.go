package startupmem

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// madvPageout is MADV_PAGEOUT (Linux 5.4): reclaim the range's pages now.
const madvPageout = 21

// mapping is one line of /proc/self/maps.
type mapping struct {
	start, end uintptr
	perms      string
	path       string
}

// pageOutExecutable madvises every read-only mapping of the running
// executable with MADV_PAGEOUT.
func pageOutExecutable() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("finding the executable: %w", err)
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("reading the mappings: %w", err)
	}
	defer f.Close()
	var maps []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := parseMapping(sc.Text()); ok && m.path == exe && readOnly(m.perms) {
			maps = append(maps, m)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading the mappings: %w", err)
	}
	var n int64
	for _, m := range maps {
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, madvPageout); e != 0 {
			if errors.Is(e, syscall.EINVAL) && n == 0 {
				return 0, errors.New("madvise MADV_PAGEOUT is not supported by this kernel")
			}
			return n, fmt.Errorf("madvise of %s %x-%x: %w", m.perms, m.start, m.end, e)
		}
		n += int64(m.end - m.start)
	}
	return n, nil
}

// readOnly reports whether a mapping's permissions forbid writing: only
// such pages are reclaimed (their content is the file's).
func readOnly(perms string) bool { return len(perms) == 4 && perms[0] == 'r' && perms[1] == '-' }

// parseMapping parses "start-end perms offset dev inode path".
func parseMapping(line string) (mapping, bool) {
	f := strings.Fields(line)
	if len(f) < 6 {
		return mapping{}, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return mapping{}, false
	}
	return mapping{start: uintptr(start), end: uintptr(end), perms: f[1], path: strings.Join(f[5:], " ")}, true
}
