package main

import (
	"context"
	"fmt"
	"io"
)

// runServe runs the gateway. It is replaced by the gateway implementation.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "turngate serve: not yet implemented")
	return 1
}
