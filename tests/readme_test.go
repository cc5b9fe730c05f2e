package tests

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickStartAddr is where the README's run command serves: the embedded
// default configuration's listen address.
const quickStartAddr = "127.0.0.1:8080"

// quickStartTimeout bounds the README's command until /healthz answers; it
// compiles the binary first (go run).
const quickStartTimeout = 5 * time.Minute

// TestREADMEQuickStart runs the run command of README.md's "Quick start"
// section verbatim from a fresh clone of the repository and checks that it
// serves /healthz and a chat.
func TestREADMEQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs README's quick start command (go run) from a fresh clone")
	}
	command, err := quickStartCommand(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "--quiet", "--no-hardlinks", repoRoot, dir).CombinedOutput(); err != nil {
		t.Fatalf("cloning the repository: %v\n%s", err, out)
	}
	if l, err := net.Listen("tcp", quickStartAddr); err != nil {
		t.Fatalf("the README's command serves on %s, which is busy: %v", quickStartAddr, err)
	} else {
		l.Close()
	}

	output := &lockedBuffer{}
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = output, output
	// Its own process group, so that the binary go run starts stops too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stopGroup(t, cmd.Process.Pid, exited)
		if t.Failed() || testing.Verbose() {
			t.Logf("%s (in %s):\n%s", command, dir, output)
		}
	})

	base := "http://" + quickStartAddr
	deadline := time.Now().Add(quickStartTimeout)
	for {
		select {
		case <-exited:
			t.Fatalf("%q exited before serving (its output is below)", command)
		default:
		}
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q did not serve /healthz within %v", command, quickStartTimeout)
		}
		time.Sleep(pollInterval)
	}

	g := &gateway{t: t, URL: base}
	s := g.chat("demo", userChat("readme-1", "u1", "weather in Lisbon", nil))
	if _, ok := s.toolCall("weather"); !ok {
		t.Errorf("the quick start's demo agent did not call weather:\n%s", s)
	}
}

// stopGroup sends SIGTERM to the process group pgid, then SIGKILL if the
// leader has not exited within stopTimeout.
func stopGroup(t *testing.T, pgid int, exited <-chan struct{}) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		t.Errorf("the README's command did not stop within %v of SIGTERM; killing it", stopTimeout)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
}

// quickStartCommand returns the first ```sh block after the "Quick start"
// heading of the README at path.
func quickStartCommand(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading README: %w", err)
	}
	defer f.Close()
	var (
		inSection, inBlock bool
		block              []string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inBlock && strings.HasPrefix(line, "```"):
			if cmd := strings.TrimSpace(strings.Join(block, "\n")); cmd != "" {
				return cmd, nil
			}
			return "", fmt.Errorf("%s: the first sh block under Quick start is empty", path)
		case inBlock:
			block = append(block, line)
		case strings.HasPrefix(line, "#"):
			inSection = strings.Contains(strings.ToLower(line), "quick start")
		case inSection && strings.TrimSpace(line) == "```sh":
			inBlock = true
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading README: %w", err)
	}
	return "", fmt.Errorf("%s: no ```sh block under a \"Quick start\" heading", path)
}
