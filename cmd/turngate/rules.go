package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/turngate/turngate/policy"
)

// Output formats of the rules commands.
const (
	formatPretty = "pretty"
	formatJSON   = "json"
)

// newFlagSet returns a flag set for a rules command whose usage line is
// "turngate name synopsis".
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: turngate %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// errUsage marks a command line that was rejected; the flag package or
// parseDir has already printed why.
var errUsage = errors.New("usage error")

// parseDir parses args, allowing flags after the directory argument
// ("turngate check rules/ --format json"), and returns the one directory.
// The error is flag.ErrHelp for -h, errUsage otherwise.
func parseDir(fs *flag.FlagSet, args []string) (string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", err
			}
			return "", errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	if len(positional) != 1 {
		what := "rules directory"
		if fs.Name() == "init" {
			what = "directory to write"
		}
		fmt.Fprintf(fs.Output(), "turngate %s: want exactly one %s, got %d arguments\n", fs.Name(), what, len(positional))
		fs.Usage()
		return "", errUsage
	}
	return positional[0], nil
}

// usageExit is the exit code of a parseDir error: 0 for -h, 2 otherwise.
func usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

// checkFormat validates a --format value.
func checkFormat(fs *flag.FlagSet, format string) bool {
	if format == formatPretty || format == formatJSON {
		return true
	}
	fmt.Fprintf(fs.Output(), "turngate %s: unknown --format %q (want pretty or json)\n", fs.Name(), format)
	return false
}

// writeErrors prints diagnostics: one "file:line:col: code: message" line
// each with its indented snippet (pretty), or a JSON array of policy.Error.
func writeErrors(w io.Writer, format string, errs policy.Errors) {
	if format == formatJSON {
		writeJSON(w, errs)
		return
	}
	writeDiagnostics(w, errs)
	fmt.Fprintf(w, "%d %s\n", len(errs), plural(len(errs), "error", "errors"))
}

// writeDiagnostics prints one "file:line:col: code: message" line per
// diagnostic, each followed by its indented snippet.
func writeDiagnostics(w io.Writer, errs policy.Errors) {
	for _, e := range errs {
		head := *e
		head.Snippet = ""
		fmt.Fprintln(w, head.Error())
		if e.Snippet != "" {
			fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(e.Snippet, "\n", "\n    "))
		}
	}
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the values are plain data; nothing fails to encode
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
