// Package startupmem gives back the memory a process touched only while
// starting: the garbage of initialisation (debug.FreeOSMemory) and the
// pages of its own executable that start-up read (package init, rule
// compilation, configuration decoding) and serving may never read again.
//
// A Go binary's code and read-only data are mapped from its file, and
// start-up faults most of them in: in turngate that is two thirds of the
// idle resident set. Release asks the kernel to reclaim those pages
// (madvise MADV_PAGEOUT, Linux 5.4 and later); the ones serving needs
// are faulted back in from the file on first use, the rest stay out. It
// never touches writable or anonymous memory, so no data is lost.
package startupmem

import (
	"runtime/debug"
)

// Release frees the heap's garbage to the operating system and asks the
// kernel to reclaim the executable's read-only pages. It returns how many
// bytes of the executable's mappings it asked to be reclaimed; an error
// means only the second part failed (or is unsupported here).
func Release() (int64, error) {
	debug.FreeOSMemory()
	return pageOutExecutable()
}
