package tests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeTimeout bounds npm ci and the Node suite each.
const nodeTimeout = 10 * time.Minute

// lockStamp records, inside node_modules, the SHA-256 of the
// package-lock.json it was installed from, so npm ci runs once per lock.
const lockStamp = ".turngate-lock-sha256"

// TestNodeClients runs the Node.js suite in tests/node (the ai package's
// transport and Chat class, and the official openai client) against the
// built gateway serving testdata/node.
func TestNodeClients(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping the Node.js client suite: %s is not in PATH", tool)
		}
	}
	suite, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	npmCI(t, suite)

	g := startGateway(t, gatewayOptions{Config: "turngate.yaml", Dir: fixture(t, "node")})

	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test")
	cmd.Dir = suite
	cmd.Env = append(os.Environ(), "TURNGATE_URL="+g.URL, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test failed: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("node --test:\n%s", out)
	}
}

// npmCI installs the suite's locked dependencies unless node_modules was
// installed from the same package-lock.json already.
func npmCI(t *testing.T, suite string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(suite, "package-lock.json"))
	if err != nil {
		t.Fatalf("reading the suite's lock file: %v", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(suite, "node_modules", lockStamp)
	if got, err := os.ReadFile(stamp); err == nil && strings.TrimSpace(string(got)) == want {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = suite
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", suite, err, out)
	}
	if err := os.WriteFile(stamp, []byte(want+"\n"), 0o644); err != nil {
		t.Fatalf("writing %s: %v", stamp, err)
	}
}
