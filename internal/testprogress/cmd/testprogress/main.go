// Command testprogress reads `go test -json` on stdin and prints a line per
// finished package, every 30 seconds what is still running, and the output
// of whatever failed; it exits 1 when something failed. CI runs
//
//	go test -race -json ./... | go run ./internal/testprogress/cmd/testprogress
package main

import (
	"os"
	"time"

	"github.com/turngate/turngate/internal/testprogress"
)

// interval is how often the still-running line is printed: often enough
// that a slow package never looks hung, seldom enough to stay readable.
const interval = 30 * time.Second

func main() {
	if testprogress.Run(os.Stdin, os.Stdout, interval) {
		os.Exit(1)
	}
}
