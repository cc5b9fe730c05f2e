// Command load measures a turngate gateway under load over real HTTP and SSE.
//
// It either targets a running gateway (-url) or builds and starts one itself
// (-start) on a generated configuration: an agent on the scripted model with
// a set number of text chunks per step and a delay between stream parts, and
// a rules directory of generated Rego and CEL rules. Modes:
//
//	turns         C concurrent sessions of 2-step turns with 1 server tool call
//	idle-streams  N open streams that stay idle; the gateway's RSS
//	policy        beforeToolCall decisions/s through POST /v1/admin/rules/eval
//	soak          turns for a long duration, sampling goroutines and heap
//	relay         the per-chunk relay cost: turns at two chunk counts
//	opa-compare   in-process Rego decisions versus an OPA server on loopback
//	peer-compare  turns against the AI SDK streamText peer (tests/load/peer)
//
// Every mode prints a table, or JSON with -json. docs/PERFORMANCE.md has the
// commands and the latest figures. Nothing here is asserted in tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// params are the load program's inputs.
type params struct {
	Mode     string        `json:"mode"`
	URL      string        `json:"url,omitempty"`
	Start    bool          `json:"start"`
	PID      int           `json:"pid,omitempty"`
	APIKey   string        `json:"-"`
	Agent    string        `json:"agent"`
	Conc     int           `json:"concurrency"`
	Duration time.Duration `json:"duration"`
	Turns    int           `json:"turns,omitempty"`
	Rate     float64       `json:"rate,omitempty"`
	Warmup   time.Duration `json:"warmup"`

	Chunks       int           `json:"chunksPerStep"`
	ChunkDelay   time.Duration `json:"chunkDelay"`
	SessionTurns int           `json:"turnsPerSession"`
	Rego         int           `json:"regoRules"`
	CEL          int           `json:"celRules"`
	Counters     int           `json:"counters,omitempty"`
	Audit        string        `json:"audit"`
	Rev          string        `json:"rev,omitempty"`
	StoreDir     string        `json:"storeDir,omitempty"`
	// Store is the started gateway's store driver; Replicas how many
	// gateway processes share it (PostgreSQL only), PGDSN the server
	// their database is created on.
	Store    string `json:"store"`
	Replicas int    `json:"replicas"`
	PGDSN    string `json:"-"`
	// GatewayEnv holds KEY=VALUE settings added to the started gateway's
	// environment only (e.g. GOGC=400), not to the load generator's.
	GatewayEnv envList `json:"gatewayEnv,omitempty"`

	// Rounds is how many turngate/peer pairs of windows peer-compare runs.
	Rounds int `json:"rounds,omitempty"`

	Streams int           `json:"streams,omitempty"`
	Hold    time.Duration `json:"hold,omitempty"`
	Sample  time.Duration `json:"sample,omitempty"`

	OPA        string `json:"-"`
	CPUProfile string `json:"cpuProfile,omitempty"`
	Keep       bool   `json:"-"`
	JSON       bool   `json:"-"`
	Verbose    bool   `json:"-"`
}

// Modes.
const (
	modeTurns   = "turns"
	modeIdle    = "idle-streams"
	modePolicy  = "policy"
	modeSoak    = "soak"
	modeRelay   = "relay"
	modeCompare = "opa-compare"
	modePeer    = "peer-compare"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	p, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "load: %v\n", err)
		return 2
	}
	rep, err := runMode(ctx, p, stderr)
	if rep != nil {
		if werr := rep.write(stdout, p.JSON); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "load: %v\n", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (*params, error) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := &params{}
	fs.StringVar(&p.Mode, "mode", modeTurns, "what to measure: turns, idle-streams, policy, soak, relay, opa-compare or peer-compare")
	fs.StringVar(&p.URL, "url", "", "base `URL` of a running gateway (instead of -start)")
	fs.BoolVar(&p.Start, "start", false, "build and start a gateway on a generated config and rules")
	fs.IntVar(&p.PID, "pid", 0, "with -url: the gateway's process id, for CPU and RSS from /proc")
	fs.StringVar(&p.APIKey, "api-key", os.Getenv("TURNGATE_API_KEY"), "with -url: bearer key (default $TURNGATE_API_KEY)")
	fs.StringVar(&p.Agent, "agent", "", "agent to chat with (default: bench with -start, demo with -url)")
	fs.IntVar(&p.Conc, "c", 64, "concurrent sessions (or policy clients)")
	fs.DurationVar(&p.Duration, "duration", 20*time.Second, "how long to measure (after -warmup)")
	fs.IntVar(&p.Turns, "turns", 0, "stop after this many measured turns or decisions (0: use -duration)")
	fs.Float64Var(&p.Rate, "rate", 0, "turns, soak, relay: start this many turns per second across the sessions (0: each session starts its next turn when the last one ends)")
	fs.DurationVar(&p.Warmup, "warmup", 3*time.Second, "load before measuring starts")
	fs.IntVar(&p.Chunks, "chunks", 40, "with -start: text chunks the scripted model streams per step")
	fs.DurationVar(&p.ChunkDelay, "chunk-delay", time.Millisecond, "with -start: the scripted model's pause between stream parts")
	fs.IntVar(&p.SessionTurns, "session-turns", 8, "turns per session before a worker starts a new one")
	fs.IntVar(&p.Rego, "rego", 20, "with -start: generated Rego rules (beforeToolCall)")
	fs.IntVar(&p.CEL, "cel", 10, "with -start: generated CEL rules (beforeTurn and beforeStep)")
	fs.IntVar(&p.Counters, "counters", 0, "with -start: declared state counters (0-3) a beforeToolCall rule reads, counted per principal, session and tool")
	fs.StringVar(&p.Audit, "audit", "file", "with -start: the gateway's audit sink (file or none)")
	fs.StringVar(&p.Rev, "rev", "", "with -start: build the gateway from this git `revision` (e.g. HEAD) instead of the working tree")
	fs.Var(&p.GatewayEnv, "gateway-env", "with -start: add `KEY=VALUE` to the gateway's environment only (repeatable), e.g. GOGC=400")
	fs.StringVar(&p.StoreDir, "store-dir", "", "with -start: `directory` of the SQLite file (default: the temporary directory; /dev/shm takes disk syncs out)")
	fs.StringVar(&p.Store, "store", storeSQLite, "with -start: the store, sqlite or postgres (a fresh database on -pg-dsn's server, dropped at the end)")
	fs.IntVar(&p.Replicas, "replicas", 1, "with -start -store postgres: gateway processes on the one database; turns go to a random one")
	fs.StringVar(&p.PGDSN, "pg-dsn", defaultPGDSN, "with -store postgres: a postgres:// `URL` of the server and a database to connect to for creating the run's database")
	fs.IntVar(&p.Rounds, "rounds", 3, "peer-compare: turngate/peer pairs of measured windows, interleaved")
	fs.IntVar(&p.Streams, "n", 10000, "idle-streams: streams to hold open")
	fs.DurationVar(&p.Hold, "hold", 10*time.Second, "idle-streams: how long to hold them open")
	fs.DurationVar(&p.Sample, "sample", 10*time.Second, "soak: interval between samples of /metrics")
	fs.StringVar(&p.OPA, "opa", "", "opa-compare: an opa binary (default: built from go.mod's OPA version)")
	fs.StringVar(&p.CPUProfile, "cpuprofile", "", "with -start: write the gateway's CPU profile of the measured window to `file`, its goroutines halfway through to file.goroutines (idle-streams: its heap at the end of the hold to file.heap)")
	fs.BoolVar(&p.Keep, "keep", false, "with -start: keep the temporary directory (config, rules, logs)")
	fs.BoolVar(&p.JSON, "json", false, "print the report as JSON")
	fs.BoolVar(&p.Verbose, "v", false, "log progress to stderr")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return p, p.validate()
}

func (p *params) validate() error {
	switch p.Mode {
	case modePeer:
		if !p.Start {
			return errors.New("-mode peer-compare needs -start: it compares the generated turn")
		}
	case modeTurns, modeIdle, modePolicy, modeSoak, modeRelay:
		if p.Start == (p.URL != "") {
			return fmt.Errorf("-mode %s needs exactly one of -start and -url", p.Mode)
		}
	case modeCompare:
		if p.Start || p.URL != "" {
			return errors.New("-mode opa-compare runs in process: it takes neither -start nor -url")
		}
	default:
		return fmt.Errorf("unknown -mode %q (want turns, idle-streams, policy, soak, relay, opa-compare or peer-compare)", p.Mode)
	}
	switch {
	case p.Conc < 1:
		return errors.New("-c must be at least 1")
	case p.Rate < 0:
		return errors.New("-rate must not be negative")
	case p.Duration <= 0 && p.Turns <= 0:
		return errors.New("set a positive -duration or -turns")
	case p.Chunks < 1:
		return errors.New("-chunks must be at least 1")
	case p.ChunkDelay < 0 || p.Warmup < 0 || p.Hold < 0:
		return errors.New("durations must not be negative")
	case p.Rego < 1 || p.CEL < 0:
		return errors.New("-rego must be at least 1 and -cel not negative")
	case p.SessionTurns < 1:
		return errors.New("-session-turns must be at least 1")
	case p.Streams < 1:
		return errors.New("-n must be at least 1")
	case p.Rounds < 1:
		return errors.New("-rounds must be at least 1")
	case p.Sample <= 0:
		return errors.New("-sample must be positive")
	case p.Audit != "file" && p.Audit != "none":
		return fmt.Errorf("-audit must be file or none, not %q", p.Audit)
	case p.CPUProfile != "" && !p.Start:
		return errors.New("-cpuprofile needs -start (the gateway is built with a pprof listener)")
	case len(p.GatewayEnv) > 0 && !p.Start:
		return errors.New("-gateway-env needs -start")
	case p.Store != storeSQLite && p.Store != storePostgres:
		return fmt.Errorf("-store must be sqlite or postgres, not %q", p.Store)
	case p.Store == storePostgres && !p.Start:
		return errors.New("-store postgres needs -start")
	case p.Replicas < 1:
		return errors.New("-replicas must be at least 1")
	case p.Replicas > 1 && p.Store != storePostgres:
		return errors.New("-replicas above 1 needs -store postgres: a SQLite file serves one gateway")
	}
	if p.Agent == "" {
		p.Agent = "demo"
		if p.Start {
			p.Agent = benchAgent
		}
	}
	p.URL = strings.TrimSuffix(p.URL, "/")
	return nil
}

// runMode runs the selected measurement. The report is returned even with
// an error when some figures were gathered.
func runMode(ctx context.Context, p *params, log io.Writer) (*report, error) {
	rep := newReport(p)
	if p.Mode == modeCompare {
		return rep, compareOPA(ctx, p, rep, logger(p, log))
	}
	gw, err := openGateway(ctx, p, logger(p, log))
	if err != nil {
		return nil, err
	}
	defer gw.close()
	switch p.Mode {
	case modeTurns:
		err = runTurns(ctx, p, gw, rep)
	case modeIdle:
		err = runIdle(ctx, p, gw, rep)
	case modePolicy:
		err = runPolicy(ctx, p, gw, rep)
	case modeSoak:
		err = runSoak(ctx, p, gw, rep)
	case modeRelay:
		err = runRelay(ctx, p, gw, rep)
	case modePeer:
		err = runPeerCompare(ctx, p, gw, rep)
	}
	if perr := gw.finishProfile(); perr != nil && err == nil {
		err = perr
	}
	return rep, err
}

// logger returns a progress logger: stderr with -v, discarded otherwise.
func logger(p *params, w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if p.Verbose {
			fmt.Fprintf(w, "load: "+format+"\n", args...)
		}
	}
}

// envList is a repeatable KEY=VALUE flag.
type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }

func (e *envList) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	*e = append(*e, v)
	return nil
}
