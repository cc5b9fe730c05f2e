// Package npmci installs a Node package's locked dependencies with
// `npm ci`, once per package-lock.json: the SHA-256 of the lock file it
// installed from is stamped inside node_modules, and a matching stamp
// skips the install.
package npmci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// stamp is the file inside node_modules holding the lock file's SHA-256.
const stamp = ".turngate-lock-sha256"

// Install runs `npm ci` in dir unless its node_modules was installed from
// the same package-lock.json already.
func Install(ctx context.Context, dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("reading the lock file: %w", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	path := filepath.Join(dir, "node_modules", stamp)
	if got, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(got)) == want {
		return nil
	}
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	if err := os.WriteFile(path, []byte(want+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
