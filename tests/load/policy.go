package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/turngate/turngate/engine"
)

// rateRun is a rate measurement: operations per second and their latency.
type rateRun struct {
	Ops       int         `json:"ops"`
	WindowS   float64     `json:"windowSeconds"`
	PerSecond float64     `json:"perSecond"`
	Latency   latency     `json:"latency"`
	Errors    errorCounts `json:"errors"`
}

func (r *rateRun) rows(row func(string, string, ...any)) {
	if r == nil {
		return
	}
	row("decisions", "%d in %.1f s", r.Ops, r.WindowS)
	row("decisions/s", "%.0f", r.PerSecond)
	row("decision latency", "%s", r.Latency)
	row("errors", "%s", r.Errors)
}

// sampleToolCall is the beforeToolCall context the policy and opa-compare
// modes decide: a search call by a tenant's user in the second step of a
// turn, after one earlier call, the shape the generated rules look at.
func sampleToolCall() *engine.ToolCallContext {
	return &engine.ToolCallContext{
		Identity: engine.Identity{RequestID: "req_load", SessionID: "load-session", Agent: benchAgent,
			EntryPath: engine.EntryChat, Principal: engine.Principal{Tenant: "acme", Subject: "user-1", Roles: []string{"user"}}},
		Type:       "tool-call",
		ToolCallID: "call_1_0",
		ToolName:   "search",
		Input:      json.RawMessage(`{"query":"turngate","limit":10}`),
		Tool: engine.ToolInfo{Name: "search", Kind: engine.ToolKindBuiltin, Description: "Search the demo corpus.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}`)},
		StepNumber: 1,
		Messages: []engine.ModelMessage{{Role: engine.RoleUser,
			Content: []engine.ContentPart{{Type: engine.ContentText, Text: "search turngate"}}}},
		Body: map[string]any{"mode": "read-write"},
		PreviousCalls: []engine.ToolCallRecord{{ToolCallID: "call_0_0", ToolName: "weather",
			Input: json.RawMessage(`{"city":"Hiville"}`), Decision: engine.DecisionAllow, Success: true}},
	}
}

// rateLoad runs op from conc workers until ctx is done or limit ops
// started, and summarises the ops finished.
func rateLoad(ctx context.Context, conc, limit int, op func(context.Context) (string, error)) *rateRun {
	type result struct {
		lat  []time.Duration
		errs errorCounts
	}
	res := make([]result, conc)
	var (
		mu      sync.Mutex
		started int
	)
	claim := func() bool {
		if limit <= 0 {
			return true
		}
		mu.Lock()
		defer mu.Unlock()
		started++
		return started <= limit
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			r := &res[w]
			for ctx.Err() == nil && claim() {
				t := time.Now()
				kind, err := op(ctx)
				if err != nil {
					if ctx.Err() != nil {
						return // the window ended mid-operation: not a failure
					}
					r.errs.add(kind, err.Error())
					continue
				}
				r.lat = append(r.lat, time.Since(t))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	out := &rateRun{WindowS: wall.Seconds()}
	var all []time.Duration
	for _, r := range res {
		all = append(all, r.lat...)
		out.Errors.merge(r.errs)
	}
	out.Ops = len(all)
	out.PerSecond = float64(out.Ops) / wall.Seconds()
	out.Latency = summarize(all, 0)
	return out
}

// window returns the measurement context: -turns bounds the count instead
// of the time.
func window(ctx context.Context, p *params) (context.Context, context.CancelFunc) {
	if p.Turns > 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, p.Duration)
}

// runPolicy is the policy mode: beforeToolCall decisions through the admin
// dry-run endpoint, C clients at once.
func runPolicy(ctx context.Context, p *params, gw *gateway, rep *report) error {
	in, err := json.Marshal(sampleToolCall())
	if err != nil {
		return fmt.Errorf("encoding the tool call: %w", err)
	}
	body, err := json.Marshal(map[string]any{"hook": "beforeToolCall", "input": json.RawMessage(in)})
	if err != nil {
		return fmt.Errorf("encoding the eval request: %w", err)
	}
	op := func(ctx context.Context) (string, error) {
		resp, err := gw.do(ctx, http.MethodPost, "/v1/admin/rules/eval", body)
		if err != nil {
			return "transport", err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return "transport", err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("http-%d", resp.StatusCode), fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(data))
		}
		var res struct {
			Outcome string `json:"outcome"`
			Error   string `json:"error"`
		}
		if err := json.Unmarshal(data, &res); err != nil {
			return "decode", err
		}
		if res.Error != "" {
			return "outcome-" + res.Outcome, errors.New(res.Error)
		}
		return "", nil
	}
	if p.Warmup > 0 {
		wctx, cancel := context.WithTimeout(ctx, p.Warmup)
		w := rateLoad(wctx, p.Conc, 0, op)
		cancel()
		if w.Ops == 0 && w.Errors.total() > 0 {
			rep.Policy = w
			return fmt.Errorf("every warm-up decision failed: %s", w.Errors.Samples[0])
		}
	}
	before, err := gw.sample(ctx)
	if err != nil {
		return err
	}
	peak := gw.samplePeak(ctx)
	self := selfCPU()
	gw.startProfile(ctx, p.Duration)
	mctx, cancel := window(ctx, p)
	defer cancel()
	start := time.Now()
	r := rateLoad(mctx, p.Conc, p.Turns, op)
	wall := time.Since(start)
	rep.LoadCPUSeconds = (selfCPU() - self).Seconds()
	after, err := gw.sample(ctx)
	if err != nil {
		return err
	}
	rep.Policy = r
	rep.Gateway = procWindow(before, after, wall, r.Ops, peak.end())
	return nil
}
