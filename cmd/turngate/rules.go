package main

import (
	"context"
	"fmt"
	"io"
)

// runCheck, runTest and runEval are replaced by the rules CLI implementation.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "turngate check: not yet implemented")
	return 1
}

func runTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "turngate test: not yet implemented")
	return 1
}

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "turngate eval: not yet implemented")
	return 1
}
