package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Timeouts of the gateway's life cycle. Building includes compiling the
// whole binary on a cold cache, which takes minutes on a 2-core machine.
const (
	buildTimeout = 15 * time.Minute
	readyTimeout = 90 * time.Second
	stopTimeout  = 15 * time.Second
	// idleChunkDelay is the scripted model's pause in idle-streams mode: far
	// longer than any hold, so every stream stays open and silent.
	idleChunkDelay = time.Hour
)

// pprofOverlay is added to cmd/turngate at build time (go build -overlay)
// when -cpuprofile is set: it serves net/http/pprof on a second loopback
// listener, without changing the gateway's source.
//
//go:embed testdata/pprof.go.txt
var pprofOverlay []byte

// pprofEnv names the overlay's listen address variable.
const pprofEnv = "TURNGATE_LOAD_PPROF"

// gateway is the gateway under load: started by us or targeted by URL.
type gateway struct {
	base   string
	pid    int // 0 when unknown (a -url target without -pid)
	apiKey string
	client *http.Client
	dir    string // temporary directory of a started gateway
	db     string // its SQLite file
	keep   bool
	cmd    *exec.Cmd
	exited chan struct{}
	pprof  string // pprof base URL of a started gateway with -cpuprofile
	model  modelShape
	log    func(string, ...any)

	profile    chan error // the running CPU profile's result
	profileOut string

	// The replicas of a started gateway (-replicas): base is bases[0], pid
	// pids[0], cmd cmds[0]. pg is their PostgreSQL database (-store
	// postgres), nil on SQLite.
	bases []string
	pids  []int
	cmds  []*exec.Cmd
	exits []chan struct{}
	pg    *pgTarget
}

// modelShape is what the scripted model streams, known only for a started
// gateway (whose script we wrote).
type modelShape struct {
	known  bool
	script script
	delay  time.Duration
}

// streamTime is the scripted model's own streaming time for one turn of
// prompt: the delay before every part but the first of each step.
func (m modelShape) streamTime(prompt string) time.Duration {
	var n int
	for _, p := range m.script.parts(prompt) {
		n += p - 1
	}
	return time.Duration(n) * m.delay
}

// openGateway starts a gateway (-start) or checks the one at -url.
func openGateway(ctx context.Context, p *params, log func(string, ...any)) (*gateway, error) {
	gw := &gateway{base: p.URL, pid: p.PID, apiKey: p.APIKey, keep: p.Keep, log: log, client: newClient(p.Conc)}
	if p.Start {
		if err := gw.start(ctx, p); err != nil {
			gw.close()
			return nil, err
		}
		return gw, nil
	}
	if p.Mode == modeRelay {
		return nil, errors.New("-mode relay needs -start: it relies on the generated model script")
	}
	if err := gw.waitReady(ctx, 5*time.Second); err != nil {
		return nil, err
	}
	return gw, nil
}

// newClient returns a keep-alive HTTP client for conc concurrent streams.
func newClient(conc int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conc + 16
	t.MaxIdleConnsPerHost = conc + 16
	t.DisableCompression = true
	return &http.Client{Transport: t}
}

// start writes a config, rules and model script into a temporary
// directory, builds the binary and runs `turngate serve` on a free port.
func (gw *gateway) start(ctx context.Context, p *params) error {
	dir, err := os.MkdirTemp("", "turngate-load-")
	if err != nil {
		return fmt.Errorf("creating temporary directory: %w", err)
	}
	gw.dir, gw.db = dir, dbPath(dir, p)
	delay := p.ChunkDelay
	if p.Mode == modeIdle {
		delay = idleChunkDelay
	}
	script := newScript(p.Chunks)
	gw.model = modelShape{known: true, script: script, delay: delay}
	if p.Store == storePostgres {
		if gw.pg, err = openPG(ctx, p.PGDSN); err != nil {
			return err
		}
	}
	if err := writeSetup(dir, p, script, delay, gw.pg); err != nil {
		return err
	}
	if p.Rev != "" {
		// The report names the exact commit measured.
		root, err := moduleRoot(ctx)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "git", "rev-parse", "--verify", p.Rev+"^{commit}")
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("resolving -rev %s: %w", p.Rev, err)
		}
		p.Rev = strings.TrimSpace(string(out))
	}
	bin, err := buildGateway(ctx, dir, p.Rev, p.CPUProfile != "", gw.log)
	if err != nil {
		return err
	}
	for i := range p.Replicas {
		if err := gw.startReplica(ctx, p, bin, i); err != nil {
			return err
		}
	}
	return nil
}

// startReplica starts replica i of the gateway and waits until it is
// ready; the first one is gw.base, gw.pid and gw.cmd.
func (gw *gateway) startReplica(ctx context.Context, p *params, bin string, i int) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	base := "http://" + port
	cmd := exec.Command(bin, "serve", "-config", filepath.Join(gw.dir, "config.yaml"), "-listen", port)
	cmd.Dir = gw.dir
	logName := "gateway.log"
	if i > 0 {
		logName = fmt.Sprintf("gateway-%d.log", i)
	}
	logf, err := os.Create(filepath.Join(gw.dir, logName))
	if err != nil {
		return fmt.Errorf("creating gateway log: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), p.GatewayEnv...)
	if p.CPUProfile != "" && i == 0 {
		pp, err := freePort()
		if err != nil {
			return err
		}
		gw.pprof = "http://" + pp
		gw.profileOut = p.CPUProfile
		cmd.Env = append(cmd.Env, pprofEnv+"="+pp)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting gateway: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	gw.bases, gw.pids = append(gw.bases, base), append(gw.pids, cmd.Process.Pid)
	gw.cmds, gw.exits = append(gw.cmds, cmd), append(gw.exits, exited)
	gw.base, gw.pid, gw.cmd, gw.exited = gw.bases[0], gw.pids[0], gw.cmds[0], gw.exits[0]
	gw.log("gateway replica %d pid %d on %s (dir %s)", i, cmd.Process.Pid, base, gw.dir)
	if err := gw.waitReadyAt(ctx, base, exited, readyTimeout); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(filepath.Join(gw.dir, logName), 20))
	}
	return nil
}

// buildGateway builds cmd/turngate into dir, from the working tree or
// from the git revision rev, with the pprof overlay when asked.
func buildGateway(ctx context.Context, dir, rev string, withPprof bool, log func(string, ...any)) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	if rev != "" {
		if root, err = exportRev(ctx, root, rev, filepath.Join(dir, "src"), log); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "turngate")
	args := []string{"build", "-o", bin}
	if withPprof {
		src := filepath.Join(dir, "pprof.go")
		if err := os.WriteFile(src, pprofOverlay, 0o644); err != nil {
			return "", fmt.Errorf("writing pprof overlay: %w", err)
		}
		overlay, err := json.Marshal(map[string]map[string]string{
			"Replace": {filepath.Join(root, "cmd", "turngate", "zz_load_pprof.go"): src}})
		if err != nil {
			return "", fmt.Errorf("encoding overlay: %w", err)
		}
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o644); err != nil {
			return "", fmt.Errorf("writing overlay: %w", err)
		}
		args = append(args, "-overlay", ov)
	}
	args = append(args, "./cmd/turngate")
	log("building the gateway: go %s", strings.Join(args, " "))
	bctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(bctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the gateway: %w\n%s", err, out)
	}
	return bin, nil
}

// exportRev writes the tree of the git revision rev of the repository at
// root into dst (git archive, which leaves the repository untouched) and
// returns dst.
func exportRev(ctx context.Context, root, rev, dst string, log func(string, ...any)) (string, error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", fmt.Errorf("exporting %s: %w", rev, err)
	}
	log("exporting git revision %s", rev)
	archive := exec.CommandContext(ctx, "git", "archive", "--format=tar", rev+"^{commit}")
	archive.Dir = root
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dst)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", fmt.Errorf("exporting %s: %w", rev, err)
	}
	untar.Stdin = pipe
	var stderr bytes.Buffer
	archive.Stderr, untar.Stderr = &stderr, &stderr
	if err := untar.Start(); err != nil {
		return "", fmt.Errorf("exporting %s: %w", rev, err)
	}
	if err := archive.Run(); err != nil {
		_ = untar.Wait()
		return "", fmt.Errorf("exporting %s: %w\n%s", rev, err, stderr.Bytes())
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("exporting %s: %w\n%s", rev, err, stderr.Bytes())
	}
	return dst, nil
}

// moduleRoot is the directory of the turngate module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("finding the module root: run the load program inside the turngate module")
	}
	return filepath.Dir(mod), nil
}

// freePort returns a loopback host:port that was free a moment ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls /readyz until it answers 200.
func (gw *gateway) waitReady(ctx context.Context, timeout time.Duration) error {
	return gw.waitReadyAt(ctx, gw.base, gw.exited, timeout)
}

// waitReadyAt waits until the gateway at base answers /readyz 200; exited,
// when not nil, is closed when its process ends.
func (gw *gateway) waitReadyAt(ctx context.Context, base string, exited chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if exited != nil {
			select {
			case <-exited:
				return fmt.Errorf("gateway at %s exited while starting", base)
			default:
			}
		}
		resp, err := gw.doAt(ctx, base, http.MethodGet, "/readyz", nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("gateway at %s not ready after %v: %v", base, timeout, last)
}

// do sends one request to the gateway.
func (gw *gateway) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	return gw.doAt(ctx, gw.replicaBase(method, path), method, path, body)
}

// doAt sends one request to the gateway at base.
func (gw *gateway) doAt(ctx context.Context, base, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if gw.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+gw.apiKey)
	}
	return gw.client.Do(req)
}

// close stops a started gateway (SIGTERM, then SIGKILL) and removes its
// directory unless -keep.
func (gw *gateway) close() {
	for i, cmd := range gw.cmds {
		if cmd.Process == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-gw.exits[i]:
		case <-time.After(stopTimeout):
			_ = cmd.Process.Kill()
			<-gw.exits[i]
		}
	}
	if gw.pg != nil && !gw.keep {
		gw.pg.close()
	}
	if gw.dir == "" {
		return
	}
	if gw.keep {
		gw.log("kept %s and %s", gw.dir, gw.db)
		return
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(gw.db + suffix)
	}
	os.RemoveAll(gw.dir)
}

// startProfile starts a CPU profile of d seconds of a started gateway
// built with the pprof overlay; finishProfile waits for it.
func (gw *gateway) startProfile(ctx context.Context, d time.Duration) {
	if gw.pprof == "" {
		return
	}
	gw.profile = make(chan error, 2)
	secs := max(1, int(d.Round(time.Second)/time.Second))
	go func() {
		gw.profile <- fetchPprof(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", gw.pprof, secs), gw.profileOut)
	}()
	go func() {
		select {
		case <-time.After(d / 2):
		case <-ctx.Done():
		}
		gw.profile <- fetchPprof(ctx, gw.pprof+"/debug/pprof/goroutine?debug=1", gw.profileOut+".goroutines")
	}()
}

// fetchPprof saves the pprof document at url to the file out.
func fetchPprof(ctx context.Context, url, out string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching %s: %s", url, resp.Status)
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("writing profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("writing profile: %w", err)
	}
	return f.Close()
}

func (gw *gateway) finishProfile() error {
	if gw.profile == nil {
		return nil
	}
	return errors.Join(<-gw.profile, <-gw.profile)
}

// procStat is one sample of the gateway process.
type procStat struct {
	CPU time.Duration // user + system CPU time so far
	RSS int64         // resident set, bytes
	HWM int64         // peak resident set, bytes (0 when unknown)
}

// userHZ is the unit of /proc/<pid>/stat's CPU times: USER_HZ, 100 on
// every Linux architecture Go supports.
const userHZ = 100

// sample reads the gateway's CPU time and RSS: from /proc when its pid is
// known, else from its process_* metrics.
func (gw *gateway) sample(ctx context.Context) (procStat, error) {
	if gw.pid > 0 {
		return readProc(gw.pid)
	}
	m, err := gw.metrics(ctx)
	if err != nil {
		return procStat{}, err
	}
	return procStat{
		CPU: time.Duration(m["process_cpu_seconds_total"] * float64(time.Second)),
		RSS: int64(m["process_resident_memory_bytes"]),
	}, nil
}

// readProc reads /proc/<pid>/stat and /proc/<pid>/status.
func readProc(pid int) (procStat, error) {
	var s procStat
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("reading process stats: %w", err)
	}
	// The command name (field 2) may contain spaces; fields after its
	// closing parenthesis start at field 3 (state).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return s, errors.New("reading process stats: malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return s, errors.New("reading process stats: short /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return s, fmt.Errorf("reading process stats: %w", err)
	}
	s.CPU = time.Duration(utime+stime) * time.Second / userHZ
	status, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("reading process status: %w", err)
	}
	defer status.Close()
	sc := bufio.NewScanner(status)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return s, fmt.Errorf("reading process status %s: %w", k, err)
		}
		if k == "VmRSS" {
			s.RSS = kb << 10
		} else {
			s.HWM = kb << 10
		}
	}
	return s, sc.Err()
}

// metrics scrapes the gateway's /metrics and returns its unlabelled
// samples by name.
func (gw *gateway) metrics(ctx context.Context) (map[string]float64, error) {
	resp, err := gw.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scraping metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the unlabelled samples of a Prometheus text
// exposition ("name value" lines); comments and labelled series are
// skipped.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		val, _, _ = strings.Cut(val, " ") // drop an optional timestamp
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return nil, fmt.Errorf("scraping metrics: %s: %w", name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scraping metrics: %w", err)
	}
	return out, nil
}

// peakSampler polls the gateway's RSS once a second to find the peak when
// /proc's VmHWM is not available.
type peakSampler struct {
	mu   sync.Mutex
	peak int64
	stop chan struct{}
	done chan struct{}
}

func (gw *gateway) samplePeak(ctx context.Context) *peakSampler {
	ps := &peakSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ps.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if s, err := gw.sampleAll(ctx); err == nil {
				ps.mu.Lock()
				ps.peak = max(ps.peak, s.RSS, s.HWM)
				ps.mu.Unlock()
			}
			select {
			case <-ps.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ps
}

func (ps *peakSampler) end() int64 {
	close(ps.stop)
	<-ps.done
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.peak
}

// tail returns the last n lines of the file at path, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
