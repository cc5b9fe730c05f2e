package ruleset

import (
	"errors"
	"io/fs"
	"os"
)

// errLinkOut is the error of a rule file that is a symbolic link leading
// out of the rules directory.
var errLinkOut = errors.New("a symbolic link out of the rules directory is not followed (a link must stay inside it, as a Kubernetes ConfigMap's links into ..data/ do)")

// dirFS is a rules directory on disk. Each Open opens the directory afresh
// as an os.Root, so that symbolic links are followed only as far as they
// stay inside it — a ConfigMap's "name -> ..data/name" and "..data ->
// ..2024_…" links load, a link to /etc/passwd or ../secrets is refused
// (errLinkOut) and never read — and so that a rules directory that is
// itself a symlink swapped to a new target is read at its new target, as
// os.DirFS would.
type dirFS string

// Open opens name inside the directory.
func (d dirFS) Open(name string) (fs.File, error) {
	r, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, err
	}
	defer r.Close() // the file opened stays valid
	f, err := r.Open(name)
	if err != nil {
		if fi, lerr := r.Lstat(name); !errors.Is(err, fs.ErrNotExist) && lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			err = &fs.PathError{Op: "open", Path: name, Err: errLinkOut}
		}
		return nil, err // not f: a nil *os.File is not a nil fs.File
	}
	return f, nil
}
