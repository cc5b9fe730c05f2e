package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// idleDialers bounds the streams being opened at once: the listen backlog
// and the gateway's session creation absorb a few hundred at a time.
const idleDialers = 256

// idleRun is the idle-streams mode's result.
type idleRun struct {
	Requested int `json:"requested"`
	// Open is how many were open at the end of the hold.
	Open  int     `json:"open"`
	OpenS float64 `json:"secondsToOpen"`
	HoldS float64 `json:"holdSeconds"`
	// BaseRSSMB is the gateway's RSS before the streams; RSSMB with all of
	// them open at the end of the hold.
	BaseRSSMB float64 `json:"baseRssMB"`
	RSSMB     float64 `json:"rssMB"`
	// PerStreamKB is the RSS growth per open stream.
	PerStreamKB float64     `json:"perStreamKB"`
	Goroutines  float64     `json:"goroutines"`
	HeapInuseMB float64     `json:"heapInuseMB"`
	Errors      errorCounts `json:"errors"`
}

func (r *idleRun) rows(row func(string, string, ...any)) {
	if r == nil {
		return
	}
	row("idle streams", "%d of %d open after %.1f s, held %.0f s", r.Open, r.Requested, r.OpenS, r.HoldS)
	row("gateway RSS", "%.1f MiB before, %.1f MiB with the streams open (%.1f KiB per stream)", r.BaseRSSMB, r.RSSMB, r.PerStreamKB)
	row("gateway goroutines", "%.0f", r.Goroutines)
	row("gateway heap in use", "%.1f MiB", r.HeapInuseMB)
	row("errors", "%s", r.Errors)
}

// runIdle is the idle-streams mode: open -n streams whose model pauses for
// an hour after its first part, hold them -hold, and read the gateway's
// memory.
func runIdle(ctx context.Context, p *params, gw *gateway, rep *report) error {
	base, err := gw.sample(ctx)
	if err != nil {
		return err
	}
	peak := gw.samplePeak(ctx)
	r := &idleRun{Requested: p.Streams, BaseRSSMB: float64(base.RSS) / mb}
	rep.Idle = r

	hold, release := context.WithCancel(ctx)
	defer release()
	var (
		mu     sync.Mutex
		opened sync.WaitGroup // every stream open or failed
		closed sync.WaitGroup // every stream's reader gone
		sem    = make(chan struct{}, idleDialers)
	)
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	start := time.Now()
	for i := range p.Streams {
		opened.Add(1)
		closed.Add(1)
		sem <- struct{}{}
		go func() {
			defer closed.Done()
			kind, err := openIdle(hold, gw, p.Agent, fmt.Sprintf("idle-%s-%d", run, i), func() { <-sem; opened.Done() })
			if err != nil && hold.Err() == nil {
				mu.Lock()
				r.Errors.add(kind, err.Error())
				mu.Unlock()
			}
		}()
	}
	opened.Wait()
	r.OpenS = time.Since(start).Seconds()
	gw.log("streams opened in %.1fs; holding %v", r.OpenS, p.Hold)
	select {
	case <-time.After(p.Hold):
	case <-ctx.Done():
	}
	r.HoldS = p.Hold.Seconds()
	if gw.pprof != "" {
		if err := fetchPprof(ctx, gw.pprof+"/debug/pprof/heap", gw.profileOut+".heap"); err != nil {
			return err
		}
	}
	now, err := gw.sample(ctx)
	if err != nil {
		return err
	}
	if m, err := gw.metrics(ctx); err == nil {
		r.Goroutines, r.HeapInuseMB = m["go_goroutines"], m["go_memstats_heap_inuse_bytes"]/mb
	}
	mu.Lock()
	r.Open = p.Streams - r.Errors.total() // less any that closed early
	mu.Unlock()
	r.RSSMB = float64(now.RSS) / mb
	if r.Open > 0 {
		r.PerStreamKB = float64(now.RSS-base.RSS) / 1024 / float64(r.Open)
	}
	rep.Gateway = procWindow(base, now, time.Since(start), 0, peak.end())
	release()
	closed.Wait()
	return nil
}

// openIdle opens one chat stream, calls opened once its first event
// arrived (or it failed), then reads until the stream or ctx ends. A
// stream that ends before ctx does is an error.
func openIdle(ctx context.Context, gw *gateway, agent, session string, opened func()) (string, error) {
	once := sync.OnceFunc(opened)
	defer once()
	resp, err := gw.do(ctx, http.MethodPost, "/v1/agents/"+agent+"/chat", chatBody(session, "m-"+session, promptHi))
	if err != nil {
		return "transport", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Sprintf("http-%d", resp.StatusCode), fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadSlice('\n'); err != nil {
		return "stream", fmt.Errorf("reading the first event: %w", err)
	}
	once()
	_, err = io.Copy(io.Discard, br)
	if ctx.Err() != nil {
		return "", nil
	}
	if err == nil {
		err = errors.New("the stream ended while it should idle")
	}
	return "closed-early", err
}
