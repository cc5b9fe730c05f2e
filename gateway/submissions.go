package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/tracing"
)

// submissionRequest is what a submission stores: the trusted user messages
// (ids assigned, so a replay after a restart recognises applied ones), the
// custom body and the principal it was accepted for.
type submissionRequest struct {
	Messages  []engine.UIMessage `json:"messages"`
	Body      map[string]any     `json:"body,omitempty"`
	Principal engine.Principal   `json:"principal"`
	// ResumeMessage, when set, makes the submission resume the turn of
	// that assistant message after its approvals were decided
	// (approvals.go); Messages and Body are then empty.
	ResumeMessage string `json:"resumeMessage,omitempty"`
	// Trace is the request's W3C trace context (when tracing is on): the
	// turn that runs the submission continues its trace.
	Trace tracing.Carrier `json:"trace,omitzero"`
}

// submissionPoll is the workers' backstop poll; new and finished
// submissions wake them at once.
const submissionPoll = time.Second

// maxSubmissionAttempts bounds the runs of a submission that failed on an
// unavailable store: the last one's failure is its outcome.
const maxSubmissionAttempts = 5

// submissions is the worker pool that drains durable submissions, each
// session's in order.
type submissions struct {
	s      *Server
	wake   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// stopSweep ends the approvals' expiry sweep (nil until start).
	stopSweep func()
}

func newSubmissions(s *Server) *submissions {
	ctx, cancel := context.WithCancel(context.Background())
	return &submissions{s: s, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// notify wakes one idle worker.
func (w *submissions) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// start requeues submissions a dead process left running, then starts the
// workers.
func (w *submissions) start(ctx context.Context) error {
	n, err := w.s.store.RequeueRunning(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		w.s.log.Info("requeued interrupted submissions", "count", n)
	}
	w.stopSweep = w.s.sweepApprovals()
	for range w.s.conf().Limits.SubmissionWorkers {
		w.wg.Add(1)
		go w.loop()
	}
	w.notify()
	return nil
}

// stop makes the workers stop claiming, and ends the approvals' sweep;
// running turns finish (or are aborted by Shutdown).
func (w *submissions) stop() {
	w.cancel()
	if w.stopSweep != nil {
		w.stopSweep()
	}
}

// wait waits for the workers to exit.
func (w *submissions) wait() { w.wg.Wait() }

func (w *submissions) loop() {
	defer w.wg.Done()
	ticker := time.NewTicker(submissionPoll)
	defer ticker.Stop()
	for {
		if w.ctx.Err() != nil {
			return
		}
		sub, err := w.s.store.ClaimSubmission(w.ctx, w.s.conf().Replica.ID, w.s.conf().Replica.LeaseTTL)
		switch {
		case err == nil:
			w.run(sub)
			w.notify() // the session's next submission may now be claimable
			continue
		case !errors.Is(err, store.ErrNotFound) && w.ctx.Err() == nil:
			w.s.log.Error("claiming submission", "err", err)
		}
		select {
		case <-w.ctx.Done():
			return
		case <-w.wake:
		case <-ticker.C:
		}
	}
}

// storeMasked rewrites the stored request of sub, whose turn was admitted
// (or failed for good), with its messages as the session's transcript
// stored them: masked by the beforePersist rules, so the raw message does
// not outlive its turn in the submission (nor appear in the session's
// export). A message the transcript does not hold (the turn failed before
// storing it) is left out: the submission never runs again. A failed
// rewrite is logged; the turn goes on.
func (w *submissions) storeMasked(ctx context.Context, sub *store.Submission, req submissionRequest) {
	s := w.s
	if len(req.Messages) == 0 {
		return
	}
	msgs, err := s.store.Messages(ctx, sub.Tenant, sub.SessionID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Error("submission: its stored request could not be masked", "submission", sub.ID, "err", err)
		return
	}
	stored := make(map[string]engine.UIMessage, len(msgs))
	for _, m := range msgs {
		stored[m.ID] = m
	}
	masked := req
	masked.Messages = make([]engine.UIMessage, 0, len(req.Messages))
	for _, m := range req.Messages {
		if sm, ok := stored[m.ID]; ok {
			masked.Messages = append(masked.Messages, sm)
		}
	}
	before, _ := json.Marshal(req)
	after, err := json.Marshal(masked)
	if err != nil || bytes.Equal(before, after) {
		return
	}
	if err := s.store.SetSubmissionRequest(ctx, sub.ID, sub.Attempts, after); err != nil {
		s.log.Error("submission: its stored request could not be masked", "submission", sub.ID, "err", err)
	}
}

// run runs one claimed submission and records its outcome. A turn that
// the shutdown aborts is left running in the store, so the next process
// requeues it.
func (w *submissions) run(sub *store.Submission) {
	s := w.s
	ctx := context.WithoutCancel(w.ctx)
	stopRenewing := w.renew(sub)
	finish := func(status string, result any) {
		stopRenewing()
		raw, _ := json.Marshal(result)
		err := s.store.FinishSubmission(ctx, sub.ID, sub.Attempts, status, raw)
		switch {
		case errors.Is(err, store.ErrFenced):
			// Its claim expired and another replica took it over: that
			// replica's outcome is the submission's.
			s.log.Warn("submission taken over by another replica; outcome dropped", "submission", sub.ID, "attempt", sub.Attempts)
		case err != nil:
			s.log.Error("finishing submission", "submission", sub.ID, "err", err)
		}
	}
	// failed finishes the submission as an error before its turn ran.
	failed := func(msg string) {
		finish(store.StatusError, map[string]string{"error": msg, "replica": s.conf().Replica.ID})
	}
	var req submissionRequest
	if err := json.Unmarshal(sub.Request, &req); err != nil {
		failed("stored request is unreadable")
		return
	}
	ag, ok := s.agents()[sub.Agent]
	if !ok {
		failed("agent " + sub.Agent + " is no longer configured")
		return
	}
	req.Principal.Tenant = sub.Tenant
	in := &turnInput{
		agent: ag, principal: req.Principal, sessionID: sub.SessionID, entry: engine.EntrySubmitMessages,
		requestID: "sub_" + sub.ID, create: true, body: req.Body, setBody: true,
		prepare: appendPlan(req.Messages, true),
	}
	if req.ResumeMessage != "" {
		in.entry, in.create, in.body, in.setBody, in.prepare = engine.EntryToolResult, false, nil, false, s.resumePlan(req.ResumeMessage)
	}
	// retry leaves the submission running with its claim no longer
	// renewed: once the claim expires, a worker claims it again (an
	// attempt more) and runs it anew, the tool journal keeping its
	// executed tool calls from running twice.
	retry := func(err error) bool {
		if !errors.Is(err, store.ErrUnavailable) || sub.Attempts >= maxSubmissionAttempts {
			return false
		}
		stopRenewing()
		s.log.Warn("submission failed on an unavailable store; it runs again once its claim expires",
			"submission", sub.ID, "attempt", sub.Attempts, "retryIn", s.conf().Replica.LeaseTTL, "err", err)
		return true
	}
	t, err := s.begin(req.Trace.Restore(ctx), in)
	if err != nil {
		if errors.Is(err, errShuttingDown) {
			stopRenewing()
			return // stays running; requeued at the next start (SQLite) or taken over once its claim expires
		}
		if !retry(err) {
			w.storeMasked(ctx, sub, req)
			failed(toAPIError(err).Message)
		}
		return
	}
	w.storeMasked(ctx, sub, req)
	_ = t.wait(ctx)
	if t.status == engine.StatusAborted && s.closing.Load() {
		stopRenewing()
		return // interrupted by shutdown: requeued at the next start, or taken over
	}
	if retry(t.writeErr) {
		return
	}
	resp := newTurnResponse(t)
	resp.Replica = s.conf().Replica.ID
	finish(t.status, resp)
}
