package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// report is one run's figures. Sections not measured by the mode are nil.
type report struct {
	Mode    string   `json:"mode"`
	Machine machine  `json:"machine"`
	Params  *params  `json:"params"`
	Turns   *turnRun `json:"turns,omitempty"`
	// Relay is the relay mode's per-chunk cost.
	Relay      *relayRun   `json:"relay,omitempty"`
	Policy     *rateRun    `json:"policy,omitempty"`
	Idle       *idleRun    `json:"idle,omitempty"`
	Soak       *soakRun    `json:"soak,omitempty"`
	OPACompare *compareRun `json:"opaCompare,omitempty"`
	Peer       *peerRun    `json:"peerCompare,omitempty"`
	// Gateway is the gateway process over the measured window (the sum
	// of the replicas').
	Gateway *procRun `json:"gateway,omitempty"`
	// Postgres is the database over the measured window (-store postgres).
	Postgres *pgRun `json:"postgres,omitempty"`
	// LoadCPUSeconds is this program's own CPU time over the window: on a
	// small machine the load generator competes with the gateway.
	LoadCPUSeconds float64 `json:"loadCpuSeconds,omitempty"`
}

// machine identifies where the figures came from.
type machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Time      string `json:"time"`
	// LoadAvg is /proc/loadavg at the start: other work on the machine
	// skews every figure.
	LoadAvg string `json:"loadAvg"`
}

func newReport(p *params) *report {
	return &report{Mode: p.Mode, Params: p, Machine: machine{
		CPUs:      runtime.NumCPU(),
		CPUModel:  cpuModel(),
		GoVersion: runtime.Version(),
		OS:        runtime.GOOS + "/" + runtime.GOARCH,
		Time:      time.Now().UTC().Format(time.RFC3339),
		LoadAvg:   loadAvg(),
	}}
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// loadAvg is the 1, 5 and 15-minute load averages.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

// latency summarises durations in milliseconds.
type latency struct {
	N    int     `json:"n"`
	Mean float64 `json:"meanMs"`
	P50  float64 `json:"p50Ms"`
	P95  float64 `json:"p95Ms"`
	P99  float64 `json:"p99Ms"`
	Max  float64 `json:"maxMs"`
}

// summarize sorts d in place and returns its summary; shift is subtracted
// from every figure (the model's own time, for the gateway's overhead).
func summarize(d []time.Duration, shift time.Duration) latency {
	if len(d) == 0 {
		return latency{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	ms := func(x time.Duration) float64 { return float64(x-shift) / float64(time.Millisecond) }
	return latency{
		N:    len(d),
		Mean: ms(sum / time.Duration(len(d))),
		P50:  ms(quantile(d, 0.50)),
		P95:  ms(quantile(d, 0.95)),
		P99:  ms(quantile(d, 0.99)),
		Max:  ms(d[len(d)-1]),
	}
}

// quantile is the nearest-rank q-quantile of sorted d.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (l latency) String() string {
	return fmt.Sprintf("p50 %.2f  p95 %.2f  p99 %.2f  max %.2f  mean %.2f ms", l.P50, l.P95, l.P99, l.Max, l.Mean)
}

// procRun is the gateway process over a window.
type procRun struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	// Cores is CPU seconds per wall second.
	Cores float64 `json:"cores"`
	// CPUPerOpMs is CPU milliseconds per turn or decision.
	CPUPerOpMs float64 `json:"cpuPerOpMs,omitempty"`
	PeakRSSMB  float64 `json:"peakRssMB"`
	RSSMB      float64 `json:"rssMB"`
	// PeakFrom says where the peak comes from: VmHWM, or samples of RSS.
	PeakFrom string `json:"peakFrom"`
}

const mb = 1 << 20

// procWindow describes the gateway between two samples over wall time.
func procWindow(a, b procStat, wall time.Duration, ops int, peak int64) *procRun {
	r := &procRun{
		CPUSeconds: (b.CPU - a.CPU).Seconds(),
		RSSMB:      float64(b.RSS) / mb,
		PeakFrom:   "VmHWM",
	}
	if wall > 0 {
		r.Cores = r.CPUSeconds / wall.Seconds()
	}
	if ops > 0 {
		r.CPUPerOpMs = r.CPUSeconds * 1000 / float64(ops)
	}
	hwm := b.HWM
	if hwm == 0 {
		hwm, r.PeakFrom = max(peak, b.RSS), "RSS samples"
	}
	r.PeakRSSMB = float64(hwm) / mb
	return r
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	s, err := readProc(os.Getpid())
	if err != nil {
		return 0
	}
	return s.CPU
}

// errorCounts counts failures by kind and keeps the first few messages.
type errorCounts struct {
	Counts  map[string]int `json:"counts,omitempty"`
	Samples []string       `json:"samples,omitempty"`
}

// maxErrorSamples bounds the messages kept: enough to diagnose, not a log.
const maxErrorSamples = 5

func (e *errorCounts) add(kind, msg string) {
	if e.Counts == nil {
		e.Counts = map[string]int{}
	}
	e.Counts[kind]++
	if len(e.Samples) < maxErrorSamples {
		e.Samples = append(e.Samples, kind+": "+msg)
	}
}

func (e *errorCounts) merge(o errorCounts) {
	for k, n := range o.Counts {
		if e.Counts == nil {
			e.Counts = map[string]int{}
		}
		e.Counts[k] += n
	}
	for _, s := range o.Samples {
		if len(e.Samples) < maxErrorSamples {
			e.Samples = append(e.Samples, s)
		}
	}
}

func (e errorCounts) total() int {
	n := 0
	for _, c := range e.Counts {
		n += c
	}
	return n
}

func (e errorCounts) String() string {
	if e.total() == 0 {
		return "0"
	}
	keys := make([]string, 0, len(e.Counts))
	for k := range e.Counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, e.Counts[k])
	}
	return strings.Join(parts, " ")
}

// write prints the report as a table or as indented JSON.
func (r *report) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("mode", "%s", r.Mode)
	row("machine", "%d CPUs, %s, %s, %s, load average %s", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GoVersion, r.Machine.OS, r.Machine.LoadAvg)
	if r.Params.Rate > 0 {
		row("start rate", "%g turns/s (open loop)", r.Params.Rate)
	}
	if r.Params.Start {
		row("store", "%s, %d gateway process(es)", r.Params.Store, r.Params.Replicas)
	}
	if len(r.Params.GatewayEnv) > 0 {
		row("gateway env", "%s", r.Params.GatewayEnv.String())
	}
	for _, s := range []interface {
		rows(func(string, string, ...any))
	}{r.Turns, r.Relay, r.Policy, r.Idle, r.Soak, r.OPACompare, r.Peer, r.Gateway, r.Postgres} {
		s.rows(row) // nil sections print nothing
	}
	if r.LoadCPUSeconds > 0 {
		row("load generator CPU", "%.2f s", r.LoadCPUSeconds)
	}
	for _, s := range r.errorSamples() {
		row("error sample", "%s", s)
	}
	return tw.Flush()
}

func (r *report) errorSamples() []string {
	switch {
	case r.Turns != nil:
		return r.Turns.Errors.Samples
	case r.Policy != nil:
		return r.Policy.Errors.Samples
	case r.Idle != nil:
		return r.Idle.Errors.Samples
	}
	return nil
}

func (g *procRun) rows(row func(string, string, ...any)) {
	if g == nil {
		return
	}
	row("gateway CPU", "%.2f s (%.2f cores)", g.CPUSeconds, g.Cores)
	if g.CPUPerOpMs > 0 {
		row("gateway CPU per op", "%.3f ms", g.CPUPerOpMs)
	}
	row("gateway RSS", "peak %.1f MiB (%s), now %.1f MiB", g.PeakRSSMB, g.PeakFrom, g.RSSMB)
}
