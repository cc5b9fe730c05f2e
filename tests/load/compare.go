package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/internal/benchrules"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/opa"
)

// opaModule is OPA's main package: `go build` of it at go.mod's version
// is the sidecar users would deploy beside a gateway.
const opaModule = "github.com/open-policy-agent/opa"

// compareRun is the opa-compare mode's result.
type compareRun struct {
	Rules      int    `json:"regoRules"`
	OPAVersion string `json:"opaVersion"`
	InProcess  side   `json:"inProcess"`
	Sidecar    side   `json:"sidecar"`
	// Ratio is in-process decisions/s over the sidecar's; P50Ratio and
	// P99Ratio are the sidecar's latency over in-process'.
	Ratio    float64 `json:"ratio"`
	P50Ratio float64 `json:"p50Ratio"`
	P99Ratio float64 `json:"p99Ratio"`
}

// side is one way of deciding.
type side struct {
	*rateRun
	// CPUPerDecisionUs is the CPU of every process involved (this one,
	// and the OPA server for the sidecar) per decision.
	CPUPerDecisionUs float64 `json:"cpuPerDecisionUs"`
}

func (c *compareRun) rows(row func(string, string, ...any)) {
	if c == nil {
		return
	}
	row("rego rules", "%d (OPA %s)", c.Rules, c.OPAVersion)
	for _, s := range []struct {
		name string
		side side
	}{{"in-process", c.InProcess}, {"OPA sidecar", c.Sidecar}} {
		if s.side.rateRun == nil {
			continue
		}
		row(s.name+": decisions/s", "%.0f (%d in %.1f s, errors %s)", s.side.PerSecond, s.side.Ops, s.side.WindowS, s.side.Errors)
		row(s.name+": latency", "%s", s.side.Latency)
		row(s.name+": CPU per decision", "%.1f µs", s.side.CPUPerDecisionUs)
	}
	row("ratio in-process/sidecar", "%.1f× decisions/s, sidecar p50 %.1f×, p99 %.1f× slower", c.Ratio, c.P50Ratio, c.P99Ratio)
}

// compareOPA is the opa-compare mode: the same generated policy and input
// decided in process by policy/opa, then by `opa run --server` over
// loopback HTTP with a keep-alive client, each at -c concurrency.
func compareOPA(ctx context.Context, p *params, rep *report, log func(string, ...any)) error {
	dir, err := os.MkdirTemp("", "turngate-opa-compare-")
	if err != nil {
		return fmt.Errorf("creating temporary directory: %w", err)
	}
	defer func() {
		if p.Keep {
			log("kept %s", dir)
			return
		}
		os.RemoveAll(dir)
	}()
	pol, data := benchrules.Rego(p.Rego)
	regoPath, dataPath := filepath.Join(dir, "tools.rego"), filepath.Join(dir, "data.json")
	for path, text := range map[string]string{regoPath: pol, dataPath: data} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return fmt.Errorf("writing rules: %w", err)
		}
	}
	compiled, errs := opa.Compile([]policy.File{{Path: "tools.rego", Data: []byte(pol)}},
		// No deadline to speak of, as for the OPA server: a loaded machine
		// must slow decisions down, not turn them into errors.
		[]policy.File{{Path: "data.json", Data: []byte(data)}}, opa.Options{Timeout: time.Minute})
	if errs != nil {
		return fmt.Errorf("compiling the generated policy: %w", errs)
	}
	c := &compareRun{Rules: p.Rego}
	rep.OPACompare = c
	tc := sampleToolCall()

	bin := p.OPA
	if bin == "" {
		if bin, err = buildOPA(ctx, dir, log); err != nil {
			return err
		}
	}
	srv, err := startOPA(ctx, bin, dir, regoPath, dataPath, log)
	if err != nil {
		return err
	}
	defer srv.stop()
	c.OPAVersion = srv.version
	client := newClient(p.Conc)
	if err := checkSameDecisions(ctx, compiled, client, srv.url); err != nil {
		return err
	}

	inProc := func(ctx context.Context) (string, error) {
		_, _, err := compiled.ToolCall(ctx, tc)
		if err != nil {
			return "eval", err
		}
		return "", nil
	}
	sidecar := func(ctx context.Context) (string, error) {
		_, kind, err := askOPA(ctx, client, srv.url, tc)
		return kind, err
	}
	log("in-process decisions at -c %d", p.Conc)
	c.InProcess = measureSide(ctx, p, inProc, 0)
	log("sidecar decisions at -c %d", p.Conc)
	c.Sidecar = measureSide(ctx, p, sidecar, srv.pid)
	if c.InProcess.Ops == 0 || c.Sidecar.Ops == 0 {
		return errors.New("opa-compare: a side completed no decision")
	}
	c.Ratio = c.InProcess.PerSecond / c.Sidecar.PerSecond
	c.P50Ratio = c.Sidecar.Latency.P50 / c.InProcess.Latency.P50
	c.P99Ratio = c.Sidecar.Latency.P99 / c.InProcess.Latency.P99
	return nil
}

// measureSide warms up, then measures op; pid, when set, is another
// process whose CPU counts toward the side's.
func measureSide(ctx context.Context, p *params, op func(context.Context) (string, error), pid int) side {
	if p.Warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, p.Warmup)
		rateLoad(wctx, p.Conc, 0, op)
		cancel()
	}
	cpu := func() time.Duration {
		t := selfCPU()
		if pid > 0 {
			if s, err := readProc(pid); err == nil {
				t += s.CPU
			}
		}
		return t
	}
	before := cpu()
	mctx, cancel := window(ctx, p)
	defer cancel()
	r := rateLoad(mctx, p.Conc, p.Turns, op)
	s := side{rateRun: r}
	if r.Ops > 0 {
		s.CPUPerDecisionUs = float64(cpu()-before) / float64(time.Microsecond) / float64(r.Ops)
	}
	return s
}

// askOPA asks the OPA server for data.turngate.tool_call the way a
// gateway consulting a sidecar does: encode the input document, POST it,
// decode the decision document.
func askOPA(ctx context.Context, client *http.Client, url string, tc *engine.ToolCallContext) (map[string]any, string, error) {
	body, err := json.Marshal(map[string]any{"input": opa.ToolCallInput(tc)})
	if err != nil {
		return nil, "encode", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/data/turngate/tool_call", bytes.NewReader(body))
	if err != nil {
		return nil, "request", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, "transport", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "transport", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("http-%d", resp.StatusCode), fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(data))
	}
	var out struct {
		Result map[string]any `json:"result"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, "decode", err
	}
	if out.Result == nil {
		return nil, "undefined", errors.New("data.turngate.tool_call is undefined")
	}
	return out.Result, "", nil
}

// checkSameDecisions asks both sides about an allowed call and a clamped
// one, so the comparison is of the same policy deciding the same way.
func checkSameDecisions(ctx context.Context, p *opa.Policy, client *http.Client, url string) error {
	allowed := sampleToolCall()
	clamped := sampleToolCall()
	clamped.Input = json.RawMessage(`{"query":"turngate","limit":1000}`)
	for _, tc := range []*engine.ToolCallContext{allowed, clamped} {
		d, _, err := p.ToolCall(ctx, tc)
		if err != nil {
			return fmt.Errorf("in-process decision: %w", err)
		}
		doc, _, err := askOPA(ctx, client, url, tc)
		if err != nil {
			return fmt.Errorf("sidecar decision: %w", err)
		}
		patch, _ := doc["patch"].([]any)
		if (d != nil) != (len(patch) > 0) {
			return fmt.Errorf("the two sides disagree on %s: in process %+v, sidecar %v", tc.Input, d, doc)
		}
		if d != nil {
			var want any
			if err := json.Unmarshal(d.Input, &want); err != nil {
				return fmt.Errorf("in-process decision input: %w", err)
			}
			if !reflect.DeepEqual(want, map[string]any{"query": "turngate", "limit": 50.0}) {
				return fmt.Errorf("in-process clamp gave %s", d.Input)
			}
		}
	}
	return nil
}

// buildOPA builds OPA's command at go.mod's version into dir.
func buildOPA(ctx context.Context, dir string, log func(string, ...any)) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "opa")
	log("building %s (go.mod's version)", opaModule)
	bctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(bctx, "go", "build", "-o", bin, opaModule)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building opa: %w\n%s", err, out)
	}
	return bin, nil
}

// opaServer is a running `opa run --server`.
type opaServer struct {
	cmd     *exec.Cmd
	pid     int
	url     string
	version string
	exited  chan struct{}
}

// startOPA runs the OPA server on a free loopback port with the policy
// and data files, logging to dir, and waits for its health check.
func startOPA(ctx context.Context, bin, dir, regoPath, dataPath string, log func(string, ...any)) (*opaServer, error) {
	ver, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("running opa version: %w", err)
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "opa.log"))
	if err != nil {
		return nil, fmt.Errorf("creating opa log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "run", "--server", "--addr", addr, "--log-level", "error", regoPath, dataPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting opa: %w", err)
	}
	s := &opaServer{cmd: cmd, pid: cmd.Process.Pid, url: "http://" + addr, exited: make(chan struct{}),
		version: firstField(string(ver), "Version:")}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	log("opa %s pid %d on %s", s.version, s.pid, s.url)
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("opa exited while starting:\n%s", tail(filepath.Join(dir, "opa.log"), 20))
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := http.Get(s.url + "/health")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return s, nil
		}
	}
	s.stop()
	return nil, fmt.Errorf("opa not healthy after %v", readyTimeout)
}

func (s *opaServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// firstField returns the value after key on the first line starting with
// key ("Version: 1.2.3" → "1.2.3").
func firstField(text, key string) string {
	for line := range bytes.SplitSeq([]byte(text), []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(key)); ok {
			return string(bytes.TrimSpace(v))
		}
	}
	return "unknown"
}
