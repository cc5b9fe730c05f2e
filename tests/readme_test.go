package tests

import (
	"errors"
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
const quickStartTimeout = 10 * time.Minute

// TestREADMEQuickStart runs the run command of README.md's "Quick start"
// section verbatim from a fresh clone of the repository and checks that it
// serves /healthz and a chat.
func TestREADMEQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("skipped in -short mode: runs README's quick start command (go run) from a fresh clone")
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	command, err := quickStartCommand(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
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

	exited := startGroup(t, exec.Command("sh", "-c", command), dir)

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
	checkTour(t, string(readme), dir, "")
}

// checkTour runs each block of the README's "one-minute tour" (tourBlocks)
// verbatim against the running quick start and checks its output against
// the block's "# …" comment lines: each expected line's fragments (split at
// "...") must appear in order in one output line. turngate, when not
// empty, runs in place of tourCommand (the built binary, in a directory
// that is not the repository).
func checkTour(t *testing.T, readme, dir, turngate string) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Log("curl is not installed: the tour's commands are not run")
		return
	}
	blocks := tourBlocks(readme)
	if len(blocks) == 0 {
		t.Fatal("README.md has no curl block under its one-minute tour")
	}
	for _, b := range blocks {
		var cmd, want []string
		for _, line := range strings.Split(b, "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(line), "# "); ok {
				want = append(want, c)
			} else {
				cmd = append(cmd, line)
			}
		}
		script := strings.Join(cmd, "\n")
		if turngate != "" {
			script = strings.ReplaceAll(script, tourCommand, turngate+" ")
		}
		c := exec.Command("sh", "-c", script)
		c.Dir = dir
		out, err := c.Output()
		if err != nil {
			t.Errorf("tour command failed: %v\n%s", err, b)
			continue
		}
		for _, w := range want {
			if !tourLineMatches(string(out), w) {
				t.Errorf("tour command output lacks %q\ncommand:\n%s\noutput:\n%s", w, b, out)
			}
		}
	}
}

// tourCommand is how the tour's blocks that run turngate itself start.
const tourCommand = "go run ./cmd/turngate "

// tourBlocks returns the ```sh blocks starting with curl, or with `go run
// ./cmd/turngate audit` (verifying the audit file the quick start writes),
// under the README's "one-minute tour" heading.
func tourBlocks(readme string) []string {
	var (
		blocks             []string
		inSection, inBlock bool
		block              []string
	)
	for line := range strings.SplitSeq(readme, "\n") {
		switch {
		case inBlock && strings.HasPrefix(line, "```"):
			inBlock = false
			if len(block) > 0 && (strings.HasPrefix(block[0], "curl ") || strings.HasPrefix(block[0], tourCommand+"audit ")) {
				blocks = append(blocks, strings.Join(block, "\n"))
			}
		case inBlock:
			block = append(block, line)
		case strings.HasPrefix(line, "#"):
			inSection = strings.Contains(strings.ToLower(line), "one-minute tour")
		case inSection && strings.TrimSpace(line) == "```sh":
			inBlock, block = true, nil
		}
	}
	return blocks
}

// tourLineMatches reports whether one line of out contains want's
// "..."-separated fragments in order.
func tourLineMatches(out, want string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		rest, ok := line, true
		for frag := range strings.SplitSeq(want, "...") {
			i := strings.Index(rest, frag)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(frag):]
		}
		if ok {
			return true
		}
	}
	return false
}

// startGroup starts cmd in dir, in a process group of its own (so that a
// binary that go run starts stops too), and stops the group when the test
// ends, logging its output if the test failed or runs with -v. The channel
// is closed when the command exits.
func startGroup(t *testing.T, cmd *exec.Cmd, dir string) <-chan struct{} {
	t.Helper()
	output := &lockedBuffer{}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = output, output
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
			t.Logf("%s (in %s):\n%s", strings.Join(cmd.Args, " "), dir, output)
		}
	})
	return exited
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
// heading of a README.
func quickStartCommand(readme string) (string, error) {
	var (
		inSection, inBlock bool
		block              []string
	)
	for line := range strings.SplitSeq(readme, "\n") {
		line = strings.TrimRight(line, "\r")
		switch {
		case inBlock && strings.HasPrefix(line, "```"):
			if cmd := strings.TrimSpace(strings.Join(block, "\n")); cmd != "" {
				return cmd, nil
			}
			return "", errors.New("the first sh block under Quick start is empty")
		case inBlock:
			block = append(block, line)
		case strings.HasPrefix(line, "#"):
			inSection = strings.Contains(strings.ToLower(line), "quick start")
		case inSection && strings.TrimSpace(line) == "```sh":
			inBlock = true
		}
	}
	return "", errors.New("no ```sh block under a \"Quick start\" heading")
}

// TestQuickStartCommand pins down which block the README test runs.
func TestQuickStartCommand(t *testing.T) {
	tests := []struct {
		name, readme, want, err string
	}{
		{"first sh block of the section", "# x\n```sh\nnot this\n```\n## Quick start (fresh)\ntext\n```go\nno\n```\n```sh\ngo run ./cmd/turngate serve\n```\n```sh\ngo test ./...\n```\n", "go run ./cmd/turngate serve", ""},
		{"crlf", "## Quick start\r\n```sh\r\nmake run\r\n```\r\n", "make run", ""},
		{"section ended", "## Quick start\ntext\n## Other\n```sh\nno\n```\n", "", "no ```sh block"},
		{"empty block", "## Quick start\n```sh\n\n```\n", "", "is empty"},
		{"no section", "# turngate\n```sh\nno\n```\n", "", "no ```sh block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := quickStartCommand(tt.readme)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestQuickStartInAnEmptyDirectory runs the quick start's `turngate serve`
// (no flags, the audit log kept in audit.jsonl) in an empty directory, as
// after `go install`: the rules compiled into the binary serve, the store
// goes to ./data, and the README's tour runs, twice (it must be re-runnable
// against the same gateway), verifying the audit file it wrote.
func TestQuickStartInAnEmptyDirectory(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := net.Listen("tcp", quickStartAddr); err != nil {
		t.Fatalf("the default listen address %s is busy: %v", quickStartAddr, err)
	} else {
		l.Close()
	}
	command, err := quickStartCommand(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	dir := t.TempDir()
	exited := startGroup(t, exec.Command("sh", "-c", strings.Replace(command, tourCommand, binary+" ", 1)), dir)
	g := &gateway{t: t, URL: "http://" + quickStartAddr}
	poll(t, "/healthz of turngate serve in an empty directory", func() error {
		select {
		case <-exited:
			t.Fatalf("turngate serve exited (its output is below)")
		default:
		}
		code, err := g.getJSON("/healthz", nil)
		if err == nil && code != http.StatusOK {
			err = errors.New(http.StatusText(code))
		}
		return err
	})
	for run := 1; run <= 2; run++ {
		t.Logf("tour, run %d", run)
		checkTour(t, string(readme), dir, binary)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "turngate.db")); err != nil {
		t.Errorf("the store is not under ./data: %v", err)
	}
}
