package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestStateAdmitSerialises admits 60 events of one scope key at once,
// each counting the executed ones before it and settling itself as
// blocked when it saw 20 or more: exactly 20 stay executed on both
// drivers, and the state survives a reopen.
func TestStateAdmitSerialises(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s := open(t, db)
		ctx := context.Background()
		at := time.UnixMilli(1_700_000_000_000)
		var wg sync.WaitGroup
		var mu sync.Mutex
		executed := 0
		for i := range 60 {
			wg.Go(func() {
				writes := []StateWrite{{Key: "k", Bucket: at, Value: 2, Item: fmt.Sprint(i % 7), Expires: at.Add(time.Hour)}}
				rs, err := s.AdmitState(ctx, &StateAdmission{
					Reads: []StateRead{{Key: "k", From: at.Add(-time.Hour), Outcomes: []string{"executed"}}},
					At:    at, Outcome: "executed", Writes: writes,
				})
				if err != nil {
					t.Error(err)
					return
				}
				if rs[0].Count >= 20 {
					if err := s.SettleState(ctx, &StateSettlement{Writes: writes, At: at, From: "executed", To: "blocked"}); err != nil {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				executed++
				mu.Unlock()
			})
		}
		wg.Wait()
		if executed != 20 {
			t.Fatalf("%d events executed, want 20", executed)
		}
		s = reopen(t, db, s)
		rs, err := s.AdmitState(ctx, &StateAdmission{Reads: []StateRead{
			{Key: "k", From: at.Add(-time.Hour), Outcomes: []string{"executed"}},
			{Key: "k", From: at.Add(-time.Hour)},
			{Key: "other", From: at.Add(-time.Hour)},
		}})
		if err != nil {
			t.Fatal(err)
		}
		if rs[0].Count != 20 || rs[0].Sum != 40 || rs[1].Count != 60 || rs[1].Distinct != 7 || !rs[1].Last.Equal(at) || rs[2].Count != 0 || !rs[2].Last.IsZero() {
			t.Fatalf("after reopen: %+v", rs)
		}
		// 7 items × 2 outcomes: the 60 events are 14 rows.
		if got := queryInt(t, s, "SELECT count(*) FROM rule_state_buckets"); got != 14 {
			t.Fatalf("%d rows for 60 events of 7 items in one bucket, want 14", got)
		}
		n, err := s.PruneState(ctx, at.Add(2*time.Hour), 10)
		if err != nil || n != 10 {
			t.Fatalf("PruneState = %d, %v; want a batch of 10 rows", n, err)
		}
		if got := queryInt(t, s, "SELECT count(*) FROM rule_state_buckets"); got != 4 {
			t.Fatalf("%d rows after pruning 10 of 14", got)
		}
	})
}
