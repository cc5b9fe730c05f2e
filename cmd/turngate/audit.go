package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/turngate/turngate/gateway/audit"
)

const auditUsage = `usage: turngate audit verify FILE...

verify checks the hash chain of audit files given in the order they were
written (rotated backups oldest first, then the live file): it names the
first edited, removed, added or reordered record as FILE:LINE with the
expected and the found value, and exits 1; on intact files it prints the
record count and the last record's seq and hash, and exits 0.
`

// runAudit runs turngate audit.
func runAudit(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[0] != "verify" {
		fmt.Fprint(stderr, auditUsage)
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return 0
		}
		return 2
	}
	files := args[1:]
	v := &audit.Verifier{}
	for _, name := range files {
		if err := verifyFile(v, name); err != nil {
			if br := (*audit.Break)(nil); errors.As(err, &br) {
				fmt.Fprintf(stderr, "turngate audit verify: chain broken at %v\n", err)
			} else {
				fmt.Fprintf(stderr, "turngate audit verify: %v\n", err)
			}
			return 1
		}
	}
	fmt.Fprintf(stdout, "ok: %d records in %d chains in %d files; last seq %d, last hash %s\n", v.Records, v.Chains, len(files), v.LastSeq, v.LastHash)
	for _, at := range v.Unanchored {
		fmt.Fprintf(stdout, "note: the chain-start at %s names a line before the files given: unchecked\n", at)
	}
	return 0
}

func verifyFile(v *audit.Verifier, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return v.Verify(f, name)
}
