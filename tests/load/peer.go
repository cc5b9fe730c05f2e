package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/turngate/turngate/engine/provider/scripted"
	"github.com/turngate/turngate/internal/npmci"
)

// peerDir is the AI SDK peer's Node package, relative to the module root.
const peerDir = "tests/load/peer"

// npmTimeout bounds npm ci of the peer's locked dependencies.
const npmTimeout = 5 * time.Minute

// peerRun is the peer-compare mode's result: rounds of turngate then the
// peer on the same turn, client and concurrency.
type peerRun struct {
	Rounds []peerRound `json:"rounds"`
}

// peerRound is one interleaved pair of windows.
type peerRound struct {
	LoadAvg  string    `json:"loadAvg"`
	Turngate peerSide  `json:"turngate"`
	Peer     peerSide  `json:"peer"`
	Ratio    peerRatio `json:"ratio"`
}

// peerSide is one server's window.
type peerSide struct {
	Turns *turnRun `json:"turns"`
	Proc  *procRun `json:"process"`
}

// peerRatio compares turngate with the peer: turns/s over the peer's, and
// the peer's server CPU per turn over turngate's.
type peerRatio struct {
	TurnsPerSec float64 `json:"turnsPerSecond"`
	CPUPerTurn  float64 `json:"cpuPerTurn"`
}

func (r *peerRun) rows(row func(string, string, ...any)) {
	if r == nil {
		return
	}
	for i, rd := range r.Rounds {
		for _, s := range []struct {
			name string
			side peerSide
		}{{"turngate", rd.Turngate}, {"AI SDK peer", rd.Peer}} {
			t, pr := s.side.Turns, s.side.Proc
			row(fmt.Sprintf("round %d %s", i+1, s.name), "%.0f turns/s, %.3f ms server CPU per turn, p50 %.1f ms, peak RSS %.0f MiB, errors %s",
				t.TurnsPerSec, pr.CPUPerOpMs, t.Latency.P50, pr.PeakRSSMB, t.Errors)
		}
		row(fmt.Sprintf("round %d ratio", i+1), "%.1f× the peer's turns/s, 1/%.1f of its CPU per turn (load average %s)",
			rd.Ratio.TurnsPerSec, rd.Ratio.CPUPerTurn, rd.LoadAvg)
	}
}

// runPeerCompare is the peer-compare mode: the started gateway and the AI
// SDK peer (tests/load/peer) serve the same turn to the same client,
// alternating windows for -rounds rounds.
func runPeerCompare(ctx context.Context, p *params, gw *gateway, rep *report) error {
	peer, err := startPeer(ctx, p, gw.model, gw.log)
	if err != nil {
		return err
	}
	defer peer.close()
	r := &peerRun{}
	rep.Peer = r
	for i := range p.Rounds {
		rd := peerRound{LoadAvg: loadAvg()}
		for _, s := range []struct {
			side *peerSide
			srv  *gateway
			name string
		}{{&rd.Turngate, gw, "turngate"}, {&rd.Peer, peer, "peer"}} {
			gw.log("round %d: %s", i+1, s.name)
			w, err := measureTurns(ctx, p, s.srv, promptHi, p.Conc, i == 0 && s.srv == gw)
			if w != nil {
				*s.side = peerSide{Turns: w.turns, Proc: w.gateway}
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, s.name, err)
			}
			if w.turns.Turns == 0 {
				return fmt.Errorf("round %d, %s: no turn completed (%s)", i+1, s.name, w.turns.Errors)
			}
		}
		rd.Ratio = peerRatio{
			TurnsPerSec: rd.Turngate.Turns.TurnsPerSec / rd.Peer.Turns.TurnsPerSec,
			CPUPerTurn:  rd.Peer.Proc.CPUPerOpMs / rd.Turngate.Proc.CPUPerOpMs,
		}
		r.Rounds = append(r.Rounds, rd)
	}
	return nil
}

// startPeer installs the peer's locked dependencies (npm ci) and runs its
// server on a free loopback port, streaming model's script, and returns it
// as a gateway the turn load can drive.
func startPeer(ctx context.Context, p *params, model modelShape, log func(string, ...any)) (*gateway, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, peerDir)
	log("npm ci in %s", dir)
	nctx, cancel := context.WithTimeout(ctx, npmTimeout)
	err = npmci.Install(nctx, dir)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("installing the peer: %w", err)
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command("node", "server.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORT="+port,
		"CHUNKS="+strconv.Itoa(model.script.chunks),
		"CHUNK_SIZE="+strconv.Itoa(scripted.DefaultChunkSize),
		"CHUNK_DELAY_MS="+strconv.FormatFloat(float64(model.delay)/float64(time.Millisecond), 'f', -1, 64))
	ready := make(chan struct{})
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &announce{prefix: "listening on ", ready: ready}, &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the peer: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	peer := &gateway{base: "http://" + addr, pid: cmd.Process.Pid, client: newClient(p.Conc), model: model, log: log,
		cmd: cmd, exited: exited, bases: []string{"http://" + addr}, pids: []int{cmd.Process.Pid},
		cmds: []*exec.Cmd{cmd}, exits: []chan struct{}{exited}}
	select {
	case <-ready:
	case <-exited:
		peer.close()
		return nil, fmt.Errorf("the peer exited while starting:\n%s", stderr.String())
	case <-time.After(readyTimeout):
		peer.close()
		return nil, errors.New("the peer did not start listening in time")
	case <-ctx.Done():
		peer.close()
		return nil, ctx.Err()
	}
	log("AI SDK peer pid %d on %s", peer.pid, peer.base)
	return peer, peer.waitReady(ctx, readyTimeout)
}

// announce is a process's stdout: it closes ready once a line starting
// with prefix was written, and discards the output.
type announce struct {
	prefix string
	ready  chan struct{}
	line   []byte
	done   bool
}

func (a *announce) Write(b []byte) (int, error) {
	if a.done {
		return len(b), nil
	}
	a.line = append(a.line, b...)
	for {
		i := bytes.IndexByte(a.line, '\n')
		if i < 0 {
			return len(b), nil
		}
		if bytes.HasPrefix(a.line[:i], []byte(a.prefix)) {
			a.done, a.line = true, nil
			close(a.ready)
			return len(b), nil
		}
		a.line = a.line[i+1:]
	}
}
