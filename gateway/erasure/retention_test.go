package erasure

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/syncbuf"
)

// pagedStore counts the pages of idle sessions a sweep reads.
type pagedStore struct {
	store.Store
	pages []int // each IdleSessions call's limit
}

func (p *pagedStore) IdleSessions(ctx context.Context, tenant, agent string, before time.Time, limit int) ([]store.Session, error) {
	p.pages = append(p.pages, limit)
	return p.Store.IdleSessions(ctx, tenant, agent, before, limit)
}

// TestRetentionSweepsAreBounded: with more idle sessions than one sweep
// may erase (maxRetentionBatches batches of RetentionBatch), the first
// sweep erases exactly that many, reading at most maxRetentionBatches
// pages of RetentionBatch; the next sweep erases the rest, the one after
// nothing; every erased session has its tombstone and none is left.
func TestRetentionSweepsAreBounded(t *testing.T) {
	ctx := context.Background()
	sq, err := store.OpenSQLite(filepath.Join(t.TempDir(), "turngate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	const extra = RetentionBatch + RetentionBatch/2 // a batch and a half beyond one sweep's bound
	total := maxRetentionBatches*RetentionBatch + extra
	for i := range total {
		if _, _, err := sq.GetOrCreateSession(ctx, "acme", "demo", fmt.Sprintf("s%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var log syncbuf.Buffer
	alog := audit.New(&log, nil, nil)
	st := &pagedStore{Store: sq}
	r := &Retention{Store: st, Log: alog, Tenants: map[string]time.Duration{"acme": time.Hour},
		Now:  func() time.Time { return time.Now().Add(2 * time.Hour) },
		Hold: func(context.Context, string, string) (func(), bool, error) { return func() {}, true, nil }}
	for i, want := range []int{maxRetentionBatches * RetentionBatch, extra, 0} {
		st.pages = nil
		n, err := r.Sweep(ctx)
		if err != nil || n != want {
			t.Fatalf("sweep %d erased %d sessions (%v), want %d", i+1, n, err, want)
		}
		if len(st.pages) > maxRetentionBatches {
			t.Errorf("sweep %d read %d pages, want at most %d", i+1, len(st.pages), maxRetentionBatches)
		}
		for _, limit := range st.pages {
			if limit != RetentionBatch {
				t.Errorf("sweep %d read a page of %d, want %d", i+1, limit, RetentionBatch)
			}
		}
	}
	left, err := sq.IdleSessions(ctx, "acme", "", time.Now().Add(time.Hour), store.MaxListSessions)
	if err != nil || len(left) != 0 {
		t.Errorf("after the sweeps %d sessions are left (%v), want none", len(left), err)
	}
	alog.Flush()
	if n := bytes.Count(log.Bytes(), []byte(`"kind":"erasure"`)); n != total {
		t.Errorf("the audit log has %d tombstones, want %d", n, total)
	}
}
