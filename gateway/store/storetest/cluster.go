package storetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Cluster is a PostgreSQL server of the test's own, in a temporary
// directory on a free port, for tests that stop or freeze the database
// (never the shared server of DSN). It runs as the postgres OS user, as
// PostgreSQL refuses to run as root; the test's cleanup stops it and
// removes its directory.
type Cluster struct {
	tb   testing.TB
	dir  string
	port int
	bin  string
}

// NewCluster initialises and starts a cluster.
func NewCluster(tb testing.TB) *Cluster {
	tb.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		tb.Fatal("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin")
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		tb.Fatalf("the postgres OS user: %v", err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	dir, err := os.MkdirTemp("", "turngate-pg-")
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cluster{tb: tb, dir: dir, port: freePort(tb), bin: filepath.Dir(bins[len(bins)-1])}
	tb.Cleanup(func() {
		c.Thaw()
		_ = c.pgCtl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if err := os.Chown(dir, uid, gid); err != nil {
		tb.Fatal(err)
	}
	if out, err := c.asPostgres(filepath.Join(c.bin, "initdb"), "-D", c.data(), "-U", "postgres", "--auth=trust", "--no-sync").CombinedOutput(); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	c.Start()
	return c
}

// DSN is the cluster's database.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() {
	c.tb.Helper()
	if err := c.pgCtl("start", "-w", "-l", filepath.Join(c.dir, "log"),
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", c.port, c.dir)); err != nil {
		c.tb.Fatalf("starting PostgreSQL: %v", err)
	}
}

// Stop stops the server (fast shutdown: it ends the connections).
func (c *Cluster) Stop() {
	c.tb.Helper()
	if err := c.pgCtl("stop", "-w", "-m", "fast"); err != nil {
		c.tb.Fatalf("stopping PostgreSQL: %v", err)
	}
}

// Freeze stops (SIGSTOP) the server and every process of it: it accepts
// no connection and answers nothing until Thaw.
func (c *Cluster) Freeze() { c.signal(syscall.SIGSTOP) }

// Thaw continues (SIGCONT) a frozen server.
func (c *Cluster) Thaw() { c.signal(syscall.SIGCONT) }

// signal sends sig to the postmaster and its children.
func (c *Cluster) signal(sig syscall.Signal) {
	data, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		return // not running
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
	if err != nil {
		return
	}
	pids := []int{pid}
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces, not ")".
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			if child, err := strconv.Atoi(strings.Fields(string(stat))[0]); err == nil {
				pids = append(pids, child)
			}
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) pgCtl(args ...string) error {
	args = append([]string{"-D", c.data()}, args...)
	out, err := c.asPostgres(filepath.Join(c.bin, "pg_ctl"), args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	return nil
}

// asPostgres is a command run as the postgres OS user when the test runs
// as root.
func (c *Cluster) asPostgres(name string, args ...string) *exec.Cmd {
	if os.Geteuid() != 0 {
		return exec.Command(name, args...)
	}
	return exec.Command("runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
}

// freePort returns a TCP port nothing listens on now.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
