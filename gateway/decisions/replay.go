package decisions

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing/fstest"
	"time"

	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy/replay"
	"github.com/turngate/turngate/policy/ruleset"
)

// Bounds of a candidate, a replay and a dry run, against a hostile admin
// request: a candidate of at most MaxCandidateFiles files (each at most
// ruleset.MaxFileBytes, all within the body limit), a replay of at most
// MaxReplayRecords records within ReplayTimeout, a dry run on the live
// revision and a candidate within EvalTimeout.
const (
	MaxCandidateFiles = 64
	MaxReplayRecords  = 20000
	DefaultReplay     = 1000
	ReplayTimeout     = 30 * time.Second
	EvalTimeout       = 10 * time.Second
	// replayExamples is how many examples a replay keeps per kind.
	replayExamples = 5
)

// Candidate builds a candidate revision from posted files, named as in a
// rules directory (no directories). A name that is not a plain file name,
// too many files or rules that do not load are refused whole, with the
// positioned errors.
func Candidate(files map[string]string) (*ruleset.Revision, error) {
	if len(files) == 0 {
		return nil, paramErr("candidate.files", "is empty: post the rule files by name")
	}
	if len(files) > MaxCandidateFiles {
		return nil, paramErr("candidate.files", "has %d files; at most %d", len(files), MaxCandidateFiles)
	}
	fsys := fstest.MapFS{}
	for name, text := range files {
		if name == "" || name != path.Base(name) || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
			return nil, paramErr("candidate.files", "%q is not a plain file name (no directories, not hidden)", name)
		}
		fsys[name] = &fstest.MapFile{Data: []byte(text), Mode: 0o644}
	}
	rev, errs := ruleset.LoadFS(fsys, ".", ruleset.Options{})
	if errs != nil {
		return nil, errs
	}
	return rev, nil
}

// Replay replays the decision records q selects (at most limit, oldest
// first) against rev, as `turngate replay` does an audit log; each example
// names its record's id. A range holding more than limit records is
// replayed up to the limit and reported Truncated.
func Replay(ctx context.Context, st store.Decisions, rev *ruleset.Revision, q *Query, limit int) (*replay.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, ReplayTimeout)
	defer cancel()
	r := replay.New(rev, replayExamples, nil)
	if q.None {
		return r.Report(nil), nil
	}
	dq := q.DecisionQuery
	dq.Ascending = true
	truncated := false
	for seen := 0; ; {
		if seen == limit {
			// At the limit: one more record says the range goes on.
			dq.Limit = 1
			more, err := st.QueryDecisions(ctx, dq)
			if err != nil {
				return nil, err
			}
			truncated = len(more) > 0
			break
		}
		dq.Limit = min(MaxLimit, limit-seen)
		rows, err := st.QueryDecisions(ctx, dq)
		if err != nil {
			return nil, err
		}
		for i := range rows {
			rec, err := audit.ParseLine(rows[i].Record)
			if err != nil || rec == nil {
				continue // an observation hook's record: nothing to replay
			}
			r.Add(ctx, rec, replay.Where{ID: store.FormatDecisionID(rows[i].ID)})
		}
		seen += len(rows)
		if len(rows) < dq.Limit {
			break
		}
		k := rows[len(rows)-1].Key()
		dq.After = &k
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	rep := r.Report(nil)
	rep.Truncated, rep.Limit = truncated, limit
	return rep, nil
}
