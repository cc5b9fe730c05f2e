package store

import (
	"context"
	"encoding/json"
	"errors"
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
		t0 := time.Unix(1_800_000_000, 0).UTC()
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
		if _, err := s.DecideApproval(ctx, "globex", "appr-1", ApprovalApproved, "mallory", "", t0); !errors.Is(err, ErrNotFound) {
			t.Errorf("deciding another tenant's approval: %v, want ErrNotFound", err)
		}
		list, err := s.ListApprovals(ctx, "acme", ApprovalFilter{State: ApprovalPending})
		if err != nil || len(list) != 2 || list[0].ID != "appr-1" || list[1].ID != "appr-2" {
			t.Fatalf("pending list %+v, %v", list, err)
		}

		// Decided at most once, even concurrently.
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = s.DecideApproval(ctx, "acme", "appr-1", ApprovalApproved, "bob", "ok", t0.Add(time.Minute))
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
		if _, err := s.DecideApproval(ctx, "acme", "appr-1", "maybe", "bob", "", t0); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad state: %v", err)
		}

		// appr-2 expired at t0+61s: too late to approve, and swept.
		if _, err := s.DecideApproval(ctx, "acme", "appr-2", ApprovalApproved, "bob", "", t0.Add(2*time.Minute)); !errors.Is(err, ErrConflict) {
			t.Errorf("approving an expired approval: %v, want ErrConflict", err)
		}
		expired, err := s.ExpireApprovals(ctx, t0.Add(2*time.Minute))
		if err != nil || len(expired) != 1 || expired[0].ID != "appr-2" || expired[0].State != ApprovalExpired || expired[0].Reason != "expired" {
			t.Fatalf("expired %+v, %v", expired, err)
		}
		if again, err := s.ExpireApprovals(ctx, t0.Add(2*time.Minute)); err != nil || len(again) != 0 {
			t.Errorf("second sweep %+v, %v", again, err)
		}
		list, _ = s.ListApprovals(ctx, "acme", ApprovalFilter{SessionID: "s1"})
		if len(list) != 2 || list[1].State != ApprovalExpired {
			t.Errorf("session list %+v", list)
		}
		if list, _ := s.ListApprovals(ctx, "acme", ApprovalFilter{State: ApprovalPending}); len(list) != 0 {
			t.Errorf("pending after decisions %+v", list)
		}
	})
}
