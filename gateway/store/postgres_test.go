package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestOpenPostgresRejects(t *testing.T) {
	tests := []struct {
		name    string
		dsn     string
		opts    []Option
		wantErr error  // when set, errors.Is
		want    string // in the message
	}{
		{"empty DSN", "", nil, ErrInvalid, "empty DSN"},
		{"not a DSN", "postgres://a b@/x?%zz", nil, ErrInvalid, "opening postgres store"},
		{"synchronous", defaultTestPGDSN, []Option{WithSynchronous(SynchronousNormal)}, ErrInvalid, "synchronous is a SQLite setting"},
		// Nothing listens on port 1; the password stays out of the message.
		{"unreachable", "postgres://postgres:s3cret@127.0.0.1:1/test?connect_timeout=5", nil, nil, "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenPostgres(context.Background(), tt.dsn, tt.opts...)
			if err == nil {
				s.Close()
				t.Fatal("OpenPostgres succeeded")
			}
			t.Log(err)
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("err = %v shows the DSN's password", err)
			}
		})
	}
}

// TestPostgresRefusesNonText checks that text PostgreSQL cannot store (not
// UTF-8, or a NUL byte) is ErrInvalid, not a server error.
func TestPostgresRefusesNonText(t *testing.T) {
	ctx := context.Background()
	s := open(t, freshPostgres(t))
	mustSession(t, s, "acme", "s1")
	calls := []struct {
		name string
		call func() error
	}{
		{"tenant not UTF-8", func() error { _, _, err := s.GetOrCreateSession(ctx, "acme\xff", "demo", "s2"); return err }},
		{"session id with NUL", func() error { _, err := s.Admit(ctx, "acme", "demo", "s\x00", nil, nil); return err }},
		{"last body not UTF-8", func() error { return s.SetLastBody(ctx, "acme", "s1", json.RawMessage("\"\xff\"")) }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); !errors.Is(err, ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestPostgresCommitFailureDropsSession checks that a write whose commit
// fails does not reach the cache and drops its session from it: whether it
// stored anything is unknown.
func TestPostgresCommitFailureDropsSession(t *testing.T) {
	ctx := context.Background()
	db := freshPostgres(t)
	st := open(t, db)
	s := st.(*Postgres)
	storeTranscript(t, s, "acme", "s1")
	if _, _, err := s.Transcript(ctx, "acme", "s1"); err != nil || !cached(s, "acme", "s1") {
		t.Fatalf("s1 is not cached after a read (%v)", err)
	}
	ran := false
	// A deferred foreign key fails at COMMIT.
	err := s.write(ctx, cacheKey{"acme", "s1"}, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `CREATE TEMP TABLE parent (id INTEGER PRIMARY KEY) ON COMMIT DROP;
			CREATE TEMP TABLE child (id INTEGER REFERENCES parent DEFERRABLE INITIALLY DEFERRED) ON COMMIT DROP;
			INSERT INTO child VALUES (1)`)
		return err
	}, func() { ran = true })
	if err == nil {
		t.Fatal("the commit succeeded")
	}
	t.Log(err)
	if ran {
		t.Error("the after of a failed commit ran")
	}
	if cached(s, "acme", "s1") {
		t.Error("the session is still cached after a failed commit")
	}
	assertCoherent(t, db, s, "acme", "s1")
}
