package store

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"
)

func testApproval(id, tenant, session string, requested time.Time, ttl time.Duration) Approval {
	return Approval{
		ID: id, Tenant: tenant, SessionID: session, Agent: "support", RequestID: "req-1",
		MessageID: "msg-1", ToolCallID: "call-" + id, ToolName: "transfer",
		Input:       json.RawMessage(`{"amount":5000,"currency":"EUR"}`),
		Reasons:     json.RawMessage(`[{"reason":"moves money","approvers":["role:finance"]}]`),
		Approvers:   []string{"role:finance"},
		Principal:   json.RawMessage(`{"tenant":"` + tenant + `","subject":"alice","roles":[]}`),
		RequestedAt: requested, ExpiresAt: requested.Add(ttl),
	}
}

func TestApprovals(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s := open(t, db)
		a1 := testApproval("appr-1", "acme", "s1", t0, time.Hour)
		a2 := testApproval("appr-2", "acme", "s1", t0.Add(time.Second), time.Minute)
		a2.Approvers = nil
		other := testApproval("appr-3", "globex", "s1", t0, time.Hour)
		if err := s.CreateApprovals(ctx, []Approval{a1, a2}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateApprovals(ctx, []Approval{other}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateApprovals(ctx, []Approval{a1}); !errors.Is(err, ErrConflict) {
			t.Errorf("duplicate id: %v, want ErrConflict", err)
		}
		bad := testApproval("appr-4", "acme", "s1", t0, time.Hour)
		bad.Input = json.RawMessage(`{`)
		if err := s.CreateApprovals(ctx, []Approval{bad}); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad input: %v, want ErrInvalid", err)
		}

		// Durable: a reopened store has them.
		s = reopen(t, db, s)
		got, err := s.GetApproval(ctx, "acme", "appr-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.State != ApprovalPending || string(got.Input) != string(a1.Input) || !got.RequestedAt.Equal(a1.RequestedAt) ||
			!got.ExpiresAt.Equal(a1.ExpiresAt) || len(got.Approvers) != 1 || !got.DecidedAt.IsZero() {
			t.Errorf("read back %+v", got)
		}
		if a, _ := s.GetApproval(ctx, "acme", "appr-2"); a == nil || a.Approvers == nil || len(a.Approvers) != 0 {
			t.Errorf("no approvers read back as %+v", a)
		}
		// Tenant isolation.
		if _, err := s.GetApproval(ctx, "globex", "appr-1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("other tenant's approval: %v, want ErrNotFound", err)
		}
		if _, _, err := s.DecideApproval(ctx, "globex", "appr-1", Decision{State: ApprovalApproved, By: "mallory", At: t0}); !errors.Is(err, ErrNotFound) {
			t.Errorf("deciding another tenant's approval: %v, want ErrNotFound", err)
		}
		list, err := s.ListApprovals(ctx, "acme", ApprovalFilter{State: ApprovalPending})
		if err != nil || len(list) != 2 || list[0].ID != "appr-1" || list[1].ID != "appr-2" {
			t.Fatalf("pending list %+v, %v", list, err)
		}
		if n, err := s.CountPendingApprovals(ctx); err != nil || !maps.Equal(n, map[string]int{"acme": 2, "globex": 1}) {
			t.Errorf("pending counts %v, %v, want acme 2, globex 1", n, err)
		}

		// Decided at most once, even concurrently.
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = s.DecideApproval(ctx, "acme", "appr-1", Decision{State: ApprovalApproved, By: "bob", Reason: "ok", At: t0.Add(time.Minute)})
			}()
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, ErrConflict):
				t.Errorf("concurrent decision: %v", err)
			}
		}
		if wins != 1 {
			t.Errorf("%d decisions won, want 1", wins)
		}
		got, _ = s.GetApproval(ctx, "acme", "appr-1")
		if got.State != ApprovalApproved || got.DecidedBy != "bob" || got.Reason != "ok" || !got.DecidedAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("decided %+v", got)
		}
		if _, _, err := s.DecideApproval(ctx, "acme", "appr-1", Decision{State: "maybe", By: "bob", At: t0}); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad state: %v", err)
		}

		// appr-2 expired at t0+61s: too late to approve, and swept.
		if _, _, err := s.DecideApproval(ctx, "acme", "appr-2", Decision{State: ApprovalApproved, By: "bob", At: t0.Add(2 * time.Minute)}); !errors.Is(err, ErrConflict) {
			t.Errorf("approving an expired approval: %v, want ErrConflict", err)
		}
		expired, _, err := s.ExpireApprovals(ctx, t0.Add(2*time.Minute), nil)
		if err != nil || len(expired) != 1 || expired[0].ID != "appr-2" || expired[0].State != ApprovalExpired || expired[0].Reason != "expired" {
			t.Fatalf("expired %+v, %v", expired, err)
		}
		if again, _, err := s.ExpireApprovals(ctx, t0.Add(2*time.Minute), nil); err != nil || len(again) != 0 {
			t.Errorf("second sweep %+v, %v", again, err)
		}
		list, _ = s.ListApprovals(ctx, "acme", ApprovalFilter{SessionID: "s1"})
		if len(list) != 2 || list[1].State != ApprovalExpired {
			t.Errorf("session list %+v", list)
		}
		if list, _ := s.ListApprovals(ctx, "acme", ApprovalFilter{State: ApprovalPending}); len(list) != 0 {
			t.Errorf("pending after decisions %+v", list)
		}
		if n, err := s.CountPendingApprovals(ctx); err != nil || !maps.Equal(n, map[string]int{"globex": 1}) {
			t.Errorf("pending counts after decisions %v, %v, want globex 1 alone", n, err)
		}
	})
}

// resumeOf is the tests' Resume: a submission keyed by the asking request,
// as the gateway's.
func resumeOf(a *Approval) *Submission {
	return &Submission{Tenant: a.Tenant, SessionID: a.SessionID, Agent: a.Agent, IdempotencyKey: "approvals:" + a.RequestID,
		Request: json.RawMessage(`{"resumeMessage":"` + a.MessageID + `"}`)}
}

// t0 is when the resume tests' approvals are asked.
var t0 = time.Unix(1_800_000_000, 0).UTC()

// messageApprovals stores n pending approvals of message msg (asked by
// request req) in the tenant's session, which it creates, and returns them.
func messageApprovals(t *testing.T, s Store, tenant, session, req, msg string, t0 time.Time, ttls ...time.Duration) []Approval {
	t.Helper()
	if _, _, err := s.GetOrCreateSession(context.Background(), tenant, "support", session); err != nil {
		t.Fatal(err)
	}
	as := make([]Approval, len(ttls))
	for i, ttl := range ttls {
		as[i] = testApproval(msg+"-"+string(rune('a'+i)), tenant, session, t0, ttl)
		as[i].RequestID, as[i].MessageID = req, msg
	}
	if err := s.CreateApprovals(context.Background(), as); err != nil {
		t.Fatal(err)
	}
	return as
}

// drainQueue claims and finishes every submission the store would run,
// and returns them in claim order.
func drainQueue(t *testing.T, s Store) []Submission {
	t.Helper()
	ctx := context.Background()
	out := []Submission{}
	for {
		sub, err := s.ClaimSubmission(ctx, "test", time.Hour)
		if errors.Is(err, ErrNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.FinishSubmission(ctx, sub.ID, sub.Attempts, StatusCompleted, json.RawMessage(`{}`)); err != nil {
			t.Fatal(err)
		}
		out = append(out, *sub)
	}
}

// The decision that leaves none of its message's approvals pending queues
// the resume with it: stored together, durable, once per key.
func TestApprovalDecisionQueuesResume(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx, s := context.Background(), open(t, db)
		messageApprovals(t, s, "acme", "s1", "req-1", "msg-1", t0, time.Hour, time.Hour)
		d, sub, err := s.DecideApproval(ctx, "acme", "msg-1-a", Decision{State: ApprovalApproved, By: "bob", At: t0, Resume: resumeOf})
		if err != nil || d.State != ApprovalApproved || sub != nil {
			t.Fatalf("first decision %+v, resume %+v, %v", d, sub, err)
		}
		if q := drainQueue(t, s); len(q) != 0 {
			t.Fatalf("one approval of the message pending, queued %+v", q)
		}
		d, sub, err = s.DecideApproval(ctx, "acme", "msg-1-b", Decision{State: ApprovalDenied, By: "bob", Reason: "no", At: t0, Resume: resumeOf})
		if err != nil || d.State != ApprovalDenied || sub == nil || sub.Status != StatusQueued || sub.IdempotencyKey != "approvals:req-1" ||
			sub.Tenant != "acme" || sub.SessionID != "s1" || string(sub.Request) != `{"resumeMessage":"msg-1"}` {
			t.Fatalf("last decision %+v, resume %+v, %v", d, sub, err)
		}

		s = reopen(t, db, s)
		if a, err := s.GetApproval(ctx, "acme", "msg-1-b"); err != nil || a.State != ApprovalDenied {
			t.Errorf("reopened: %+v, %v", a, err)
		}
		if q := drainQueue(t, s); len(q) != 1 || q[0].ID != sub.ID {
			t.Errorf("reopened, the queue holds %+v, want the resume %s", q, sub.ID)
		}

		// A repeated resume is the submission its key already names.
		messageApprovals(t, s, "acme", "s2", "req-2", "msg-2", t0, time.Hour)
		earlier, _, err := s.CreateSubmission(ctx, resumeOf(&Approval{Tenant: "acme", SessionID: "s2", Agent: "support", RequestID: "req-2", MessageID: "msg-2"}), QueueLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if _, sub, err := s.DecideApproval(ctx, "acme", "msg-2-a", Decision{State: ApprovalApproved, At: t0, Resume: resumeOf}); err != nil || sub == nil || sub.ID != earlier.ID {
			t.Errorf("repeated resume %+v, %v; want %s", sub, err, earlier.ID)
		}
		if q := drainQueue(t, s); len(q) != 1 || q[0].ID != earlier.ID {
			t.Errorf("after a repeated resume the queue holds %+v", q)
		}
	})
}

// A resume that cannot be queued leaves its decision undone, expiry too:
// the approval stays pending and deciding it again works.
func TestApprovalResumeFailureUndoesDecision(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx, s := context.Background(), open(t, db)
		messageApprovals(t, s, "acme", "s1", "req-1", "msg-1", t0, time.Minute)
		if _, _, err := s.CreateSubmission(ctx, &Submission{ID: "sub-taken", Tenant: "acme", SessionID: "s1", Agent: "support",
			Request: json.RawMessage(`{}`)}, QueueLimits{}); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name   string
			change func(*Submission)
			want   error
		}{
			{"submission id taken", func(sub *Submission) { sub.ID = "sub-taken" }, ErrConflict},
			{"request not JSON", func(sub *Submission) { sub.Request = json.RawMessage(`{`) }, ErrInvalid},
		}
		pending := func(when string) {
			t.Helper()
			if a, err := s.GetApproval(ctx, "acme", "msg-1-a"); err != nil || a.State != ApprovalPending || !a.DecidedAt.IsZero() || a.DecidedBy != "" {
				t.Errorf("%s: approval %+v, %v; want it pending", when, a, err)
			}
		}
		for _, tt := range tests {
			failing := func(a *Approval) *Submission {
				sub := resumeOf(a)
				tt.change(sub)
				return sub
			}
			if _, _, err := s.DecideApproval(ctx, "acme", "msg-1-a", Decision{State: ApprovalApproved, By: "bob", At: t0, Resume: failing}); !errors.Is(err, tt.want) {
				t.Errorf("%s: decision %v, want %v", tt.name, err, tt.want)
			}
			pending(tt.name + ", decided")
			if _, _, err := s.ExpireApprovals(ctx, t0.Add(time.Hour), failing); !errors.Is(err, tt.want) {
				t.Errorf("%s: expiry %v, want %v", tt.name, err, tt.want)
			}
			pending(tt.name + ", expired")
		}
		if q := drainQueue(t, s); len(q) != 1 || q[0].ID != "sub-taken" {
			t.Errorf("failed resumes queued %+v", q)
		}
		// Retried, the decision is stored with its resume.
		if _, sub, err := s.DecideApproval(ctx, "acme", "msg-1-a", Decision{State: ApprovalApproved, By: "bob", At: t0, Resume: resumeOf}); err != nil || sub == nil {
			t.Fatalf("retried decision: resume %+v, %v", sub, err)
		}
		if q := drainQueue(t, s); len(q) != 1 || q[0].IdempotencyKey != "approvals:req-1" {
			t.Errorf("after the retry the queue holds %+v", q)
		}
	})
}

// An expiry queues one resume per message it leaves with nothing pending,
// in its own transaction.
func TestApprovalExpiryQueuesResume(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx, s := context.Background(), open(t, db)
		messageApprovals(t, s, "acme", "s1", "req-1", "msg-1", t0, time.Minute, time.Minute) // both expire
		messageApprovals(t, s, "acme", "s2", "req-2", "msg-2", t0, time.Minute, time.Hour)   // one still pending
		messageApprovals(t, s, "globex", "s1", "req-3", "msg-3", t0, time.Minute)            // another tenant's
		expired, subs, err := s.ExpireApprovals(ctx, t0.Add(2*time.Minute), resumeOf)
		if err != nil || len(expired) != 4 {
			t.Fatalf("expired %+v, %v", expired, err)
		}
		got := map[string]string{}
		for _, sub := range subs {
			got[sub.Tenant+"/"+sub.SessionID] = sub.IdempotencyKey
		}
		want := map[string]string{"acme/s1": "approvals:req-1", "globex/s1": "approvals:req-3"}
		if len(subs) != 2 || !maps.Equal(got, want) {
			t.Errorf("expiry queued %+v, want %v", subs, want)
		}
		if q := drainQueue(t, s); len(q) != 2 {
			t.Errorf("the queue holds %+v", q)
		}
	})
}

// Of concurrent decisions and expiries of one message's approvals, the one
// that decides its last queues the resume, once: none sees the others'
// approvals pending after they were decided.
func TestApprovalConcurrentLastDecisions(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx, s := context.Background(), open(t, db)
		at := t0.Add(time.Second) // msg-N-c has expired, the others not
		const messages = 12
		for m := range messages {
			id := strconv.Itoa(m)
			messageApprovals(t, s, "acme", "s"+id, "req-"+id, "msg-"+id, t0, time.Hour, time.Hour, time.Millisecond)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 3*messages)
		for m := range messages {
			for _, a := range []string{"a", "b"} {
				wg.Go(func() {
					_, _, err := s.DecideApproval(ctx, "acme", "msg-"+strconv.Itoa(m)+"-"+a, Decision{State: ApprovalApproved, At: at, Resume: resumeOf})
					errs <- err
				})
			}
		}
		wg.Go(func() {
			_, _, err := s.ExpireApprovals(ctx, at, resumeOf)
			errs <- err
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		q := drainQueue(t, s)
		keys := map[string]int{}
		for _, sub := range q {
			keys[sub.IdempotencyKey]++
		}
		if len(q) != messages || len(keys) != messages {
			t.Errorf("%d resumes queued for %d messages: %v", len(q), messages, keys)
		}
	})
}
