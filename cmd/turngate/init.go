package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	defaultrules "github.com/turngate/turngate/rules"
)

// initFiles are what `turngate init` writes beside the rules: a commented
// configuration and a README to start from.
//
//go:embed initdir/turngate.yaml initdir/README.md
var initFiles embed.FS

// runInit is `turngate init DIR`: write a directory to start from — the
// rule set compiled into the binary under DIR/rules, a commented
// DIR/turngate.yaml that serves them, and DIR/README.md. It never
// overwrites: an existing file is an error naming it, before anything is
// written. Exit 1 on an error, 2 on a usage error.
func runInit(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("init", "DIR", stderr)
	dir, err := parseDir(fs, args)
	if err != nil {
		return usageExit(err)
	}
	n, err := writeInit(dir)
	if err != nil {
		fmt.Fprintf(stderr, "turngate init: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s: turngate.yaml, README.md and rules/ (%d files)\nnext: cd %s && turngate serve --config turngate.yaml\n", dir, n, dir)
	return 0
}

// writeInit writes the starting directory at dir and returns how many rule
// files it wrote.
func writeInit(dir string) (int, error) {
	files := map[string][]byte{}
	for _, name := range []string{"turngate.yaml", "README.md"} {
		data, err := initFiles.ReadFile("initdir/" + name)
		if err != nil {
			return 0, err
		}
		files[name] = data
	}
	rules, err := fs.ReadDir(defaultrules.FS, ".")
	if err != nil {
		return 0, err
	}
	for _, e := range rules {
		data, err := defaultrules.FS.ReadFile(e.Name())
		if err != nil {
			return 0, err
		}
		files[filepath.Join("rules", e.Name())] = data
	}
	for name := range files {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return 0, existsError(filepath.Join(dir, name))
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "rules"), 0o755); err != nil {
		return 0, err
	}
	for name, data := range files {
		// O_EXCL: a file made since the check above (or a link put there)
		// is not written through either.
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return 0, existsError(filepath.Join(dir, name))
		} else if err != nil {
			return 0, err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, err
		}
	}
	return len(rules), nil
}

// existsError is the error of a file init would have written over.
func existsError(path string) error {
	return fmt.Errorf("%s already exists; init never writes over a file (give it a new directory, or move the file away)", path)
}
