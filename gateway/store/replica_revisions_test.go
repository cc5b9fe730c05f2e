package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestReplicaRevisions: two replicas' stores on one PostgreSQL database;
// each replica's report replaces its last one, every replica's is listed
// by name on either, and a report without a replica or with files that
// are not JSON is refused.
func TestReplicaRevisions(t *testing.T) {
	db := freshPostgres(t)
	a, b := open(t, db).(Relay), open(t, db).(Relay)
	ctx := context.Background()
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		st  Relay
		rev ReplicaRevision
	}{
		{b, ReplicaRevision{Replica: "replica-b", Revision: "sha256:one", Files: json.RawMessage(`[{"name":"tools.rego"}]`), ReportedAt: at}},
		{a, ReplicaRevision{Replica: "replica-a", Revision: "sha256:one", Files: json.RawMessage(`[]`), ReportedAt: at}},
		{b, ReplicaRevision{Replica: "replica-b", Revision: "sha256:two", Files: json.RawMessage(`[{"name":"tools.rego"},{"name":"x.rego"}]`), ReportedAt: at.Add(time.Minute)}},
	} {
		if err := r.st.ReportRevision(ctx, r.rev); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.ReplicaRevisions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Replica != "replica-a" || got[1].Replica != "replica-b" || got[1].Revision != "sha256:two" ||
		!got[1].ReportedAt.Equal(at.Add(time.Minute)) || len(got[1].Files) == 0 {
		t.Errorf("replicas %+v, want replica-a, then replica-b at its second report", got)
	}
	var files []map[string]string
	if err := json.Unmarshal(got[1].Files, &files); err != nil || len(files) != 2 || files[1]["name"] != "x.rego" {
		t.Errorf("replica-b's files %s", got[1].Files)
	}
	for name, bad := range map[string]ReplicaRevision{
		"no replica":     {Revision: "sha256:one", Files: json.RawMessage(`[]`), ReportedAt: at},
		"files not JSON": {Replica: "replica-c", Revision: "sha256:one", Files: json.RawMessage(`[`), ReportedAt: at},
	} {
		if err := a.ReportRevision(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
