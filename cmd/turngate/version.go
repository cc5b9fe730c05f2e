package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// runVersion is `turngate version`: the module version, the commit it was
// built from (with "+dirty" for uncommitted changes) and the Go version.
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "turngate version: unexpected argument %q\n", args[0])
		return 2
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(info))
	return 0
}

// versionLine renders build info as "turngate VERSION (commit COMMIT, GO)".
func versionLine(info *debug.BuildInfo) string {
	version, commit, modified := "(devel)", "unknown", false
	if info != nil {
		if v := info.Main.Version; v != "" {
			version = v
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if modified {
		commit += "+dirty"
	}
	return fmt.Sprintf("turngate %s (commit %s, %s)", version, commit, runtime.Version())
}
