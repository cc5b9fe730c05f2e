package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

func TestToolJournal(t *testing.T) {
	key := ToolCallKey{Tenant: "acme", SessionID: "s1", RequestID: "sub_1", ToolCallID: "call_0_0"}
	ok := func(k ToolCallKey, out string) *ToolResult {
		return &ToolResult{ToolCallKey: k, ToolName: "weather", InputSHA256: "ab", Output: json.RawMessage(out)}
	}
	at := func(r *ToolResult, step, index int) *ToolResult {
		r.Step, r.CallIndex = step, index
		return r
	}
	with := func(f func(k *ToolCallKey)) ToolCallKey {
		k := key
		f(&k)
		return k
	}
	tests := []struct {
		name    string
		writes  []*ToolResult
		wantErr error // of the last write
		read    ToolCallKey
		at      [2]int      // the read's step and index
		want    *ToolResult // nil: ErrNotFound
	}{
		{name: "output", writes: []*ToolResult{ok(key, `{"t":21}`)}, read: key, want: ok(key, `{"t":21}`)},
		{
			name:   "error",
			writes: []*ToolResult{{ToolCallKey: key, ToolName: "weather", InputSHA256: "ab", Error: "tool timed out"}},
			read:   key,
			want:   &ToolResult{ToolCallKey: key, ToolName: "weather", InputSHA256: "ab", Error: "tool timed out"},
		},
		{name: "the later result replaces the earlier", writes: []*ToolResult{ok(key, `1`), ok(key, `2`)}, read: key, want: ok(key, `2`)},
		{name: "another tenant's result is not found", writes: []*ToolResult{ok(key, `1`)}, read: with(func(k *ToolCallKey) { k.Tenant = "evil" })},
		{name: "another session's result is not found", writes: []*ToolResult{ok(key, `1`)}, read: with(func(k *ToolCallKey) { k.SessionID = "s2" })},
		{name: "another request's result is not found", writes: []*ToolResult{ok(key, `1`)}, read: with(func(k *ToolCallKey) { k.RequestID = "req_2" })},
		{name: "missing", read: key},
		{
			name:   "a call named anew is found at its position",
			writes: []*ToolResult{at(ok(key, `1`), 2, 1)},
			read:   with(func(k *ToolCallKey) { k.ToolCallID = "toolu_new" }), at: [2]int{2, 1},
			want: at(ok(key, `1`), 2, 1),
		},
		{
			name:   "another position under another id is not found",
			writes: []*ToolResult{at(ok(key, `1`), 2, 1)},
			read:   with(func(k *ToolCallKey) { k.ToolCallID = "toolu_new" }), at: [2]int{2, 0},
		},
		{
			name:   "the id wins over the position",
			writes: []*ToolResult{at(ok(key, `1`), 0, 0), at(ok(with(func(k *ToolCallKey) { k.ToolCallID = "other" }), `2`), 1, 0)},
			read:   key, at: [2]int{1, 0},
			want: at(ok(key, `1`), 0, 0),
		},
		{
			name: "the latest call at a position wins",
			writes: []*ToolResult{at(ok(with(func(k *ToolCallKey) { k.ToolCallID = "run1" }), `1`), 0, 0),
				at(ok(with(func(k *ToolCallKey) { k.ToolCallID = "run2" }), `2`), 0, 0)},
			read: key,
			want: at(ok(with(func(k *ToolCallKey) { k.ToolCallID = "run2" }), `2`), 0, 0),
		},
		{name: "empty tool call id", writes: []*ToolResult{ok(with(func(k *ToolCallKey) { k.ToolCallID = "" }), `1`)}, wantErr: ErrInvalid, read: key},
		{name: "non-UTF-8 tenant", writes: []*ToolResult{ok(with(func(k *ToolCallKey) { k.Tenant = "a\xff" }), `1`)}, wantErr: ErrInvalid, read: key},
		{name: "output that is not JSON", writes: []*ToolResult{ok(key, `{`)}, wantErr: ErrInvalid, read: key},
		{name: "neither output nor error", writes: []*ToolResult{{ToolCallKey: key, ToolName: "weather", InputSHA256: "ab"}}, wantErr: ErrInvalid, read: key},
		{
			name:    "both output and error",
			writes:  []*ToolResult{{ToolCallKey: key, ToolName: "weather", InputSHA256: "ab", Output: json.RawMessage(`1`), Error: "x"}},
			wantErr: ErrInvalid, read: key,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachDB(t, func(t *testing.T, db testDB) {
				ctx := context.Background()
				s := open(t, db)
				var err error
				for _, w := range tt.writes {
					err = s.JournalToolResult(ctx, w)
				}
				if !errors.Is(err, tt.wantErr) || (err != nil && tt.wantErr == nil) {
					t.Fatalf("JournalToolResult: %v, want %v", err, tt.wantErr)
				}
				// A restarted process reads what the crashed one journaled.
				s = reopen(t, db, s)
				got, err := s.JournaledToolResult(ctx, tt.read, tt.at[0], tt.at[1])
				if tt.want == nil {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("JournaledToolResult = %+v, %v; want ErrNotFound", got, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("JournaledToolResult: %v", err)
				}
				if got.CreatedAt.IsZero() {
					t.Error("CreatedAt is zero")
				}
				got.CreatedAt = tt.want.CreatedAt
				if g, w := mustMarshal(t, got), mustMarshal(t, tt.want); g != w {
					t.Errorf("JournaledToolResult =\n%s\nwant\n%s", g, w)
				}
			})
		})
	}
}

func TestToolJournalInvalidKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		_, err := s.JournaledToolResult(context.Background(), ToolCallKey{Tenant: "acme", SessionID: "s1", RequestID: "r"}, 0, 0)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("JournaledToolResult without a tool call id: %v, want ErrInvalid", err)
		}
	})
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
