package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// turnRun is the turns mode's result.
type turnRun struct {
	Turns       int     `json:"turns"`
	WindowS     float64 `json:"windowSeconds"`
	TurnsPerSec float64 `json:"turnsPerSecond"`
	Latency     latency `json:"latency"`
	// FirstText is the time from sending the request to the first
	// text-delta event.
	FirstText latency `json:"timeToFirstText"`
	// ModelStreamMs is the scripted model's own streaming time per turn
	// (parts × chunk delay); Overhead is Latency minus it. Both are absent
	// for a -url target, whose script is unknown.
	ModelStreamMs float64  `json:"modelStreamMs,omitempty"`
	Overhead      *latency `json:"overhead,omitempty"`
	// EventsPerTurn is the mean number of SSE events a turn streamed.
	EventsPerTurn float64     `json:"eventsPerTurn"`
	Errors        errorCounts `json:"errors"`
}

func (t *turnRun) rows(row func(string, string, ...any)) {
	if t == nil {
		return
	}
	row("turns", "%d in %.1f s", t.Turns, t.WindowS)
	row("turns/s", "%.0f", t.TurnsPerSec)
	row("turn latency", "%s", t.Latency)
	row("time to first text", "%s", t.FirstText)
	if t.Overhead != nil {
		row("model stream time", "%.2f ms per turn", t.ModelStreamMs)
		row("gateway overhead", "%s", *t.Overhead)
	}
	row("events per turn", "%.1f", t.EventsPerTurn)
	row("errors", "%s", t.Errors)
}

// turnSample is one completed turn.
type turnSample struct {
	start, end time.Time
	firstText  time.Duration
	events     int
}

// turnLoad drives C workers, each running turns one after another in its
// own sessions.
type turnLoad struct {
	gw     *gateway
	agent  string
	prompt string
	conc   int
	// perSession is how many turns a worker runs in one session.
	perSession int
	run        string // distinguishes this run's session ids
	// limit, when positive, is how many turns to start in total.
	limit   int64
	started atomic.Int64
	// rate, when positive, paces the starts of all workers' turns together
	// at this many per second (see pace); otherwise each worker starts its
	// next turn as soon as the last one ended.
	rate float64
}

// workerResult is what one worker gathered.
type workerResult struct {
	samples []turnSample
	errs    errorCounts
}

// runLoad runs the workers until stop is done (or limit turns started),
// lets the turns in flight finish, and returns every worker's samples.
// Requests run under ctx.
func (l *turnLoad) runLoad(ctx, stop context.Context) []workerResult {
	res := make([]workerResult, l.conc)
	var starts <-chan struct{}
	if l.rate > 0 {
		starts = pace(stop, l.rate, l.conc)
	}
	var wg sync.WaitGroup
	for w := range l.conc {
		wg.Go(func() { res[w] = l.worker(ctx, stop, w, starts) })
	}
	wg.Wait()
	return res
}

// pace sends rate turn starts per second until stop is done, on an
// absolute schedule. A start that finds every worker busy waits in a buffer
// of one per worker; when that is full too (the gateway is slower than the
// rate), the start is dropped and the turns/s achieved falls below rate.
// Latency is measured from a turn's start, so it leaves out that wait.
func pace(stop context.Context, rate float64, workers int) <-chan struct{} {
	starts := make(chan struct{}, workers)
	go func() {
		tick := time.NewTicker(max(time.Millisecond, time.Duration(float64(time.Second)/rate)))
		defer tick.Stop()
		begin, sent := time.Now(), 0
		for {
			select {
			case <-stop.Done():
				return
			case now := <-tick.C:
				for due := int(now.Sub(begin).Seconds() * rate); sent < due; sent++ {
					select {
					case starts <- struct{}{}:
					default:
					}
				}
			}
		}
	}()
	return starts
}

// worker runs turns until stop is done, each after a start from starts
// when that is not nil.
func (l *turnLoad) worker(ctx, stop context.Context, w int, starts <-chan struct{}) workerResult {
	var r workerResult
	for n := 0; stop.Err() == nil && ctx.Err() == nil; n++ {
		if starts != nil {
			select {
			case <-starts:
			case <-stop.Done():
				return r
			}
		}
		if l.limit > 0 && l.started.Add(1) > l.limit {
			break
		}
		session := fmt.Sprintf("load-%s-%d-%d", l.run, w, n/l.perSession)
		msg := fmt.Sprintf("m-%d-%d", w, n)
		s, kind, err := l.turn(ctx, session, msg)
		if err != nil {
			if ctx.Err() != nil {
				break // interrupted: not a gateway failure
			}
			r.errs.add(kind, err.Error())
			continue
		}
		r.samples = append(r.samples, s)
	}
	return r
}

// chatBody is a DefaultChatTransport request with one new user message.
func chatBody(session, msgID, text string) []byte {
	body, _ := json.Marshal(map[string]any{
		"id":      session,
		"trigger": "submit-message",
		"messages": []map[string]any{{
			"id": msgID, "role": "user",
			"parts": []map[string]string{{"type": "text", "text": text}},
		}},
	})
	return body
}

// turn runs one chat turn and reads its stream to the end. On failure it
// returns an error kind for the counts.
func (l *turnLoad) turn(ctx context.Context, session, msgID string) (turnSample, string, error) {
	s := turnSample{start: time.Now()}
	resp, err := l.gw.do(ctx, http.MethodPost, "/v1/agents/"+l.agent+"/chat", chatBody(session, msgID, l.prompt))
	if err != nil {
		return s, "transport", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return s, fmt.Sprintf("http-%d", resp.StatusCode), fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	st, err := readStream(resp.Body, s.start, nil)
	s.end, s.firstText, s.events = time.Now(), st.firstText, st.events
	switch {
	case err != nil:
		return s, "stream", err
	case st.errorText != "":
		return s, "error-event", errors.New(st.errorText)
	case !st.done:
		return s, "no-done", errors.New("the stream ended without [DONE]")
	case st.toolErrorText != "":
		return s, "tool-error", errors.New(st.toolErrorText)
	case st.toolOutputs == 0:
		return s, "no-tool-call", errors.New("the turn made no tool call")
	case st.firstText == 0:
		return s, "no-text", errors.New("the turn streamed no text")
	case l.gw.model.known && st.clamped == 0:
		// The generated turn's search asks for a limit the policy clamps:
		// a tool output without the clamped limit means no rule ran.
		return s, "not-clamped", fmt.Errorf("the search tool's output does not show its limit clamped to %d", clampedLimit)
	}
	return s, "", nil
}

// streamStats is what readStream saw.
type streamStats struct {
	events      int
	firstText   time.Duration
	toolOutputs int
	// clamped counts tool outputs that show the search limit clamped.
	clamped int
	// toolErrorText is the last tool-output-error's text: a failed or
	// fail-closed call.
	toolErrorText string
	errorText     string
	done          bool
}

// Event framing of the UI message stream.
var (
	dataPrefix = []byte("data: ")
	typePrefix = []byte(`{"type":"`)
	doneData   = []byte("[DONE]")
	// clampedOutput is in a search output whose limit the policy clamped.
	clampedOutput = []byte(fmt.Sprintf(`"limit":%d,`, clampedLimit))
)

// readers are readStream's line readers, reused so that the load
// generator does not allocate 16 KiB per turn.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// readStream reads UI message stream events until [DONE] or EOF. Event
// types are read from the frame's leading "type" key, the encoding's
// field order, with a JSON decode as the fallback. onEvent, if set, sees
// each event's type.
func readStream(r io.Reader, start time.Time, onEvent func(string)) (streamStats, error) {
	var st streamStats
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long event (a big tool output): skip its remainder.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			st.events++
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return st, nil
			}
			return st, err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), dataPrefix)
		if !ok {
			continue
		}
		if bytes.Equal(data, doneData) {
			st.done = true
			return st, nil
		}
		st.events++
		typ := eventType(data)
		if onEvent != nil {
			onEvent(typ)
		}
		switch typ {
		case "text-delta":
			if st.firstText == 0 {
				st.firstText = time.Since(start)
			}
		case "tool-output-available":
			st.toolOutputs++
			if bytes.Contains(data, clampedOutput) {
				st.clamped++
			}
		case "error":
			st.errorText = "error event: " + errorText(data)
		case "tool-output-error":
			st.toolErrorText = "tool-output-error event: " + errorText(data)
		}
	}
}

// errorText returns an error event's "errorText".
func errorText(data []byte) string {
	var e struct {
		ErrorText string `json:"errorText"`
	}
	_ = json.Unmarshal(data, &e)
	return e.ErrorText
}

// eventType returns an event's "type".
func eventType(data []byte) string {
	if rest, ok := bytes.CutPrefix(data, typePrefix); ok {
		if i := bytes.IndexByte(rest, '"'); i >= 0 {
			return string(rest[:i])
		}
	}
	var e struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(data, &e)
	return e.Type
}

// runTurns is the turns mode: warm up, then measure C concurrent sessions
// for -duration (or -turns turns).
func runTurns(ctx context.Context, p *params, gw *gateway, rep *report) error {
	w, err := measureTurns(ctx, p, gw, promptHi, p.Conc, true)
	if w != nil {
		rep.Turns, rep.Gateway, rep.Postgres, rep.LoadCPUSeconds = w.turns, w.gateway, w.pg, w.loadCPU
	}
	return err
}

// turnWindow is one measured window of turns.
type turnWindow struct {
	turns   *turnRun
	gateway *procRun
	pg      *pgRun // nil on SQLite
	loadCPU float64
}

// measureTurns runs a warm-up, then the measured window of conc sessions
// sending prompt; profile starts the gateway's CPU profile with it.
func measureTurns(ctx context.Context, p *params, gw *gateway, prompt string, conc int, profile bool) (*turnWindow, error) {
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	if p.Warmup > 0 {
		gw.log("warming up for %v", p.Warmup)
		stop, cancel := context.WithTimeout(ctx, p.Warmup)
		warm := &turnLoad{gw: gw, agent: p.Agent, prompt: prompt, conc: conc, perSession: p.SessionTurns, run: run + "w", rate: p.Rate}
		res := warm.runLoad(ctx, stop)
		cancel()
		if n, errs := countSamples(res); n == 0 && errs.total() > 0 {
			return &turnWindow{turns: &turnRun{Errors: errs}}, fmt.Errorf("every warm-up turn failed: %s", errs.Samples[0])
		}
	}
	stop, cancel := window(ctx, p)
	defer cancel()
	load := &turnLoad{gw: gw, agent: p.Agent, prompt: prompt, conc: conc, perSession: p.SessionTurns, run: run, limit: int64(p.Turns), rate: p.Rate}
	before, err := gw.sampleAll(ctx)
	if err != nil {
		return nil, err
	}
	var pgBefore pgSample
	if gw.pg != nil {
		if pgBefore, err = gw.pg.sample(ctx); err != nil {
			return nil, err
		}
	}
	peak := gw.samplePeak(ctx)
	self := selfCPU()
	if profile {
		gw.startProfile(ctx, p.Duration)
	}
	gw.log("measuring %d sessions", conc)
	start := time.Now()
	res := load.runLoad(ctx, stop)
	end := lastEnd(res)
	if end.IsZero() {
		end = time.Now()
	}
	wall := end.Sub(start)
	w := &turnWindow{loadCPU: (selfCPU() - self).Seconds()}
	after, err := gw.sampleAll(ctx)
	if err != nil {
		return nil, err
	}
	w.turns = summarizeTurns(res, wall, gw.model, prompt)
	w.gateway = procWindow(before, after, wall, w.turns.Turns, peak.end())
	if gw.pg != nil {
		time.Sleep(1500 * time.Millisecond) // PostgreSQL flushes its statistics once a second
		pgAfter, err := gw.pg.sample(ctx)
		if err != nil {
			return nil, err
		}
		w.pg = pgWindow(pgBefore, pgAfter, w.turns.Turns)
	}
	return w, nil
}

// lastEnd is when the last turn ended: the window's true end, after the
// turns in flight at the deadline finished.
func lastEnd(res []workerResult) time.Time {
	var t time.Time
	for _, r := range res {
		if n := len(r.samples); n > 0 && r.samples[n-1].end.After(t) {
			t = r.samples[n-1].end
		}
	}
	return t
}

func countSamples(res []workerResult) (int, errorCounts) {
	var n int
	var errs errorCounts
	for _, r := range res {
		n += len(r.samples)
		errs.merge(r.errs)
	}
	return n, errs
}

// summarizeTurns merges the workers' samples.
func summarizeTurns(res []workerResult, wall time.Duration, model modelShape, prompt string) *turnRun {
	t := &turnRun{WindowS: wall.Seconds()}
	var lat, first []time.Duration
	events := 0
	for _, r := range res {
		t.Errors.merge(r.errs)
		for _, s := range r.samples {
			lat = append(lat, s.end.Sub(s.start))
			first = append(first, s.firstText)
			events += s.events
		}
	}
	t.Turns = len(lat)
	if t.Turns == 0 {
		return t
	}
	t.TurnsPerSec = float64(t.Turns) / wall.Seconds()
	t.EventsPerTurn = float64(events) / float64(t.Turns)
	t.Latency = summarize(lat, 0)
	t.FirstText = summarize(first, 0)
	if model.known {
		mt := model.streamTime(prompt)
		t.ModelStreamMs = float64(mt) / float64(time.Millisecond)
		o := summarize(lat, mt)
		t.Overhead = &o
	}
	return t
}
