package main

import (
	"context"
	"time"
)

// soakSample is one reading of the gateway's /metrics during a soak.
type soakSample struct {
	AtS         float64 `json:"atSeconds"`
	Goroutines  float64 `json:"goroutines"`
	HeapInuseMB float64 `json:"heapInuseMB"`
	RSSMB       float64 `json:"rssMB"`
}

// soakRun is the soak mode's result.
type soakRun struct {
	Turns *turnRun `json:"turns"`
	// Before is the idle gateway before the load, After the idle gateway
	// settleTime after it; Samples are taken during the load.
	Before  soakSample   `json:"before"`
	After   soakSample   `json:"after"`
	Samples []soakSample `json:"samples"`
	// HeapGrowthPct and GoroutineGrowthPct compare the mean of the last
	// fifth of the samples with that of the first fifth.
	HeapGrowthPct      float64 `json:"heapGrowthPct"`
	GoroutineGrowthPct float64 `json:"goroutineGrowthPct"`
}

// settleTime lets the gateway finish its last turns and notice the closed
// connections before the after-load sample.
const settleTime = 5 * time.Second

func (s *soakRun) rows(row func(string, string, ...any)) {
	if s == nil {
		return
	}
	s.Turns.rows(row)
	row("goroutines", "before %.0f, during %.0f → %.0f (%+.1f%%), after %.0f",
		s.Before.Goroutines, s.first().Goroutines, s.last().Goroutines, s.GoroutineGrowthPct, s.After.Goroutines)
	row("heap in use", "before %.1f MiB, during %.1f → %.1f MiB (%+.1f%%), after %.1f MiB",
		s.Before.HeapInuseMB, s.first().HeapInuseMB, s.last().HeapInuseMB, s.HeapGrowthPct, s.After.HeapInuseMB)
	row("RSS", "before %.1f MiB, end of load %.1f MiB, after %.1f MiB", s.Before.RSSMB, s.last().RSSMB, s.After.RSSMB)
	for _, x := range s.Samples {
		row("  sample", "t=%4.0fs goroutines %5.0f heap %6.1f MiB rss %6.1f MiB", x.AtS, x.Goroutines, x.HeapInuseMB, x.RSSMB)
	}
}

// first and last are the means of the first and last fifth of the samples.
func (s *soakRun) first() soakSample { return meanSample(s.Samples[:fifth(len(s.Samples))]) }
func (s *soakRun) last() soakSample {
	return meanSample(s.Samples[len(s.Samples)-fifth(len(s.Samples)):])
}

func fifth(n int) int { return max(1, n/5) }

func meanSample(xs []soakSample) soakSample {
	var m soakSample
	if len(xs) == 0 {
		return m
	}
	for _, x := range xs {
		m.Goroutines += x.Goroutines
		m.HeapInuseMB += x.HeapInuseMB
		m.RSSMB += x.RSSMB
	}
	n := float64(len(xs))
	m.Goroutines, m.HeapInuseMB, m.RSSMB = m.Goroutines/n, m.HeapInuseMB/n, m.RSSMB/n
	return m
}

// readSoak samples the gateway's metrics.
func (gw *gateway) readSoak(ctx context.Context, at time.Duration) (soakSample, error) {
	m, err := gw.metrics(ctx)
	if err != nil {
		return soakSample{}, err
	}
	return soakSample{AtS: at.Seconds(), Goroutines: m["go_goroutines"],
		HeapInuseMB: m["go_memstats_heap_inuse_bytes"] / mb, RSSMB: m["process_resident_memory_bytes"] / mb}, nil
}

// runSoak is the soak mode: the turns load for -duration while /metrics is
// sampled every -sample, then the idle gateway once more.
func runSoak(ctx context.Context, p *params, gw *gateway, rep *report) error {
	s := &soakRun{}
	rep.Soak = s
	var err error
	if s.Before, err = gw.readSoak(ctx, 0); err != nil {
		return err
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		w, err := measureTurns(ctx, p, gw, promptHi, p.Conc, true)
		if w != nil {
			s.Turns, rep.Gateway, rep.LoadCPUSeconds = w.turns, w.gateway, w.loadCPU
		}
		done <- err
	}()
	tick := time.NewTicker(p.Sample)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if len(s.Samples) == 0 {
				if x, serr := gw.readSoak(ctx, time.Since(start)); serr == nil {
					s.Samples = append(s.Samples, x)
				}
			}
			if err != nil {
				return err
			}
			return s.settle(ctx, gw, start)
		case <-tick.C:
			x, err := gw.readSoak(ctx, time.Since(start))
			if err != nil {
				return err
			}
			gw.log("soak t=%.0fs goroutines %.0f heap %.1f MiB", x.AtS, x.Goroutines, x.HeapInuseMB)
			s.Samples = append(s.Samples, x)
		}
	}
}

// settle takes the after-load sample, once this program's idle
// connections are closed, and computes the growth figures.
func (s *soakRun) settle(ctx context.Context, gw *gateway, start time.Time) error {
	gw.client.CloseIdleConnections()
	select {
	case <-time.After(settleTime):
	case <-ctx.Done():
		return ctx.Err()
	}
	var err error
	if s.After, err = gw.readSoak(ctx, time.Since(start)); err != nil {
		return err
	}
	f, l := s.first(), s.last()
	s.HeapGrowthPct = growth(f.HeapInuseMB, l.HeapInuseMB)
	s.GoroutineGrowthPct = growth(f.Goroutines, l.Goroutines)
	return nil
}

func growth(from, to float64) float64 {
	if from == 0 {
		return 0
	}
	return (to - from) / from * 100
}
