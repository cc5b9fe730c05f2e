package main

import (
	"context"
	"errors"
	"time"
)

// relayRun is the relay mode's result: -c sessions' turns at one text
// chunk per step, then at -chunks per step; the difference per extra chunk
// is what relaying one chunk costs end to end (engine, encoding, HTTP write
// and flush, minus the model's own pacing). With -c 1 the latency figure
// is clean of queueing; with many sessions the CPU figure includes the
// batching a busy gateway gets.
type relayRun struct {
	ChunksLo int      `json:"chunksLo"`
	ChunksHi int      `json:"chunksHi"`
	Lo       *turnRun `json:"lo"`
	Hi       *turnRun `json:"hi"`
	// CPUPerTurnLoMs and CPUPerTurnHiMs are the gateway's CPU per turn.
	CPUPerTurnLoMs float64 `json:"cpuPerTurnLoMs"`
	CPUPerTurnHiMs float64 `json:"cpuPerTurnHiMs"`
	// LatencyPerChunkUs is the p50 turn latency's growth per extra chunk,
	// less the model's pacing of it; CPUPerChunkUs the gateway CPU's.
	LatencyPerChunkUs float64 `json:"latencyPerChunkUs"`
	CPUPerChunkUs     float64 `json:"cpuPerChunkUs"`
}

func (r *relayRun) rows(row func(string, string, ...any)) {
	if r == nil {
		return
	}
	for _, t := range []struct {
		name   string
		chunks int
		run    *turnRun
		cpu    float64
	}{{"lo", r.ChunksLo, r.Lo, r.CPUPerTurnLoMs}, {"hi", r.ChunksHi, r.Hi, r.CPUPerTurnHiMs}} {
		row(t.name+": chunks per step", "%d", t.chunks)
		row(t.name+": turns", "%d (%.0f/s), errors %s", t.run.Turns, t.run.TurnsPerSec, t.run.Errors)
		row(t.name+": turn latency", "%s", t.run.Latency)
		row(t.name+": gateway CPU per turn", "%.3f ms", t.cpu)
	}
	row("relay latency per chunk", "%.1f µs (meaningful with -c 1; with many sessions the queueing differs between the two runs)", r.LatencyPerChunkUs)
	row("relay CPU per chunk", "%.1f µs", r.CPUPerChunkUs)
}

// runRelay is the relay mode: -c sessions at one chunk per step, then at
// -chunks per step.
func runRelay(ctx context.Context, p *params, gw *gateway, rep *report) error {
	if p.Chunks < 2 {
		return errors.New("-mode relay needs -chunks of at least 2")
	}
	lo, err := measureTurns(ctx, p, gw, promptLo, p.Conc, false)
	if err != nil {
		return err
	}
	hi, err := measureTurns(ctx, p, gw, promptHi, p.Conc, true)
	if err != nil {
		return err
	}
	rep.Gateway, rep.LoadCPUSeconds = hi.gateway, lo.loadCPU+hi.loadCPU
	r := &relayRun{ChunksLo: 1, ChunksHi: p.Chunks, Lo: lo.turns, Hi: hi.turns,
		CPUPerTurnLoMs: lo.gateway.CPUPerOpMs, CPUPerTurnHiMs: hi.gateway.CPUPerOpMs}
	rep.Relay = r
	if lo.turns.Turns == 0 || hi.turns.Turns == 0 {
		return errors.New("relay: a window completed no turn")
	}
	// Both steps stream the extra chunks.
	extra := float64(2 * (p.Chunks - 1))
	pacing := gw.model.streamTime(promptHi) - gw.model.streamTime(promptLo)
	grow := time.Duration((hi.turns.Latency.P50-lo.turns.Latency.P50)*float64(time.Millisecond)) - pacing
	r.LatencyPerChunkUs = float64(grow) / float64(time.Microsecond) / extra
	r.CPUPerChunkUs = (r.CPUPerTurnHiMs - r.CPUPerTurnLoMs) * 1000 / extra
	return nil
}
