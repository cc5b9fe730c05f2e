package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy/ruleset"
)

// A replica of a shared store reports its live rules revision and files
// to the store (store.Relay.ReportRevision) when it starts, within
// revisionCheckEvery of a reload (at once for one through the admin API)
// and every revisionReportEvery besides, so GET /v1/admin/rules lists every
// replica; one that has not reported for revisionStaleAfter is marked
// stale (stopped, cut off from the store, or hung).
const (
	revisionCheckEvery  = 2 * time.Second
	revisionReportEvery = 30 * time.Second
	revisionStaleAfter  = 3 * revisionReportEvery
)

// revisionReporter writes this replica's revision to the store.
type revisionReporter struct {
	r *replicas

	mu       sync.Mutex
	revision string    // the revision last reported
	at       time.Time // when
}

// check reports the live revision when it changed since the last report
// or that report is revisionReportEvery old; it always returns true (a
// failed report is logged and retried at the next check).
func (rr *revisionReporter) check(ctx context.Context) bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rev := rr.r.s.rules.Current()
	if rev.ID() == rr.revision && time.Since(rr.at) < revisionReportEvery {
		return true
	}
	files, _ := json.Marshal(rev.Files())
	now := time.Now().UTC()
	err := rr.r.relay.ReportRevision(ctx, store.ReplicaRevision{Replica: rr.r.s.conf().Replica.ID, Revision: rev.ID(), Files: files, ReportedAt: now})
	if err != nil {
		if ctx.Err() == nil {
			rr.r.s.log.Warn("reporting this replica's rules revision to the store; the next check retries", "err", err)
		}
		return true
	}
	rr.revision, rr.at = rev.ID(), now
	return true
}

// replicaRevision is a replica's revision as GET /v1/admin/rules lists it.
type replicaRevision struct {
	Replica    string             `json:"replica"`
	Revision   string             `json:"revision"`
	Files      []ruleset.FileInfo `json:"files"`
	ReportedAt time.Time          `json:"reportedAt"`
	// AgeSeconds is how long ago the replica reported.
	AgeSeconds int64 `json:"ageSeconds"`
	// Stale is set when it has not reported for revisionStaleAfter.
	Stale bool `json:"stale"`
}

// replicaRevisions lists what each replica of the shared store last
// reported, or nil without one (SQLite: this replica is the only one).
func (s *Server) replicaRevisions(ctx context.Context) ([]replicaRevision, error) {
	if s.rep == nil {
		return nil, nil
	}
	rows, err := s.rep.relay.ReplicaRevisions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]replicaRevision, 0, len(rows))
	for _, r := range rows {
		var files []ruleset.FileInfo
		_ = json.Unmarshal(r.Files, &files) // what a replica wrote: a list of files
		age := time.Since(r.ReportedAt)
		out = append(out, replicaRevision{Replica: r.Replica, Revision: r.Revision, Files: files, ReportedAt: r.ReportedAt,
			AgeSeconds: int64(max(age, 0) / time.Second), Stale: age > revisionStaleAfter})
	}
	return out, nil
}
