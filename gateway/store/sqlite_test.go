package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/turngate/turngate/engine"
)

// openTest opens a store on a fresh file and closes it when the test ends.
func openTest(t testing.TB) (*SQLite, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "turngate.db")
	s, err := OpenSQLite(path)
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// loadTranscript reads testdata/transcript.json.
func loadTranscript(t *testing.T) []engine.UIMessage {
	t.Helper()
	data, err := os.ReadFile("testdata/transcript.json")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []engine.UIMessage
	if err := json.Unmarshal(data, &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// text is a one-part user message.
func text(id, s string) engine.UIMessage {
	return engine.UIMessage{ID: id, Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartText, Text: s}}}
}

// mustSession creates the tenant's session id for agent "demo".
func mustSession(t testing.TB, s Store, tenant, id string) {
	t.Helper()
	if _, _, err := s.GetOrCreateSession(context.Background(), tenant, "demo", id); err != nil {
		t.Fatalf("GetOrCreateSession: %v", err)
	}
}

// storeTranscript creates the tenant's session id and appends
// testdata/transcript.json to it, returning the messages.
func storeTranscript(t *testing.T, s Store, tenant, id string) []engine.UIMessage {
	t.Helper()
	mustSession(t, s, tenant, id)
	transcript := loadTranscript(t)
	for _, m := range transcript {
		if err := s.AppendMessage(context.Background(), tenant, id, m); err != nil {
			t.Fatalf("AppendMessage %s: %v", m.ID, err)
		}
	}
	return transcript
}

// assertJSON fails unless got and want encode to the same JSON.
func assertJSON(t *testing.T, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("got  %s\nwant %s", g, w)
	}
}

// ids returns the message ids of msgs.
func ids(msgs []engine.UIMessage) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func TestMigrationsApplyOnceAcrossReopen(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ms, err := loadMigrations(migrations, "migrations/"+db.driver())
		if err != nil {
			t.Fatal(err)
		}
		s := open(t, db)
		for range 2 {
			s = reopen(t, db, s)
			n := queryInt(t, s, `SELECT COUNT(*) FROM schema_migrations`)
			maxVersion := queryInt(t, s, `SELECT MAX(version) FROM schema_migrations`)
			if n != len(ms) || maxVersion != ms[len(ms)-1].version {
				t.Errorf("schema_migrations has %d rows up to version %d, want %d up to %d", n, maxVersion, len(ms), ms[len(ms)-1].version)
			}
		}
	})
}

// TestMigrateConcurrently opens stores on a fresh database at once, as
// replicas starting together do: each opens, and the schema is migrated
// once.
func TestMigrateConcurrently(t *testing.T) {
	const opens = 4
	forEachDB(t, func(t *testing.T, db testDB) {
		var wg sync.WaitGroup
		stores := make([]Store, opens)
		errs := make([]error, opens)
		for i := range opens {
			wg.Go(func() { stores[i], errs[i] = db.openStore() })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("open %d: %v", i, err)
				continue
			}
			defer stores[i].Close()
		}
		if t.Failed() {
			return
		}
		ms, err := loadMigrations(migrations, "migrations/"+db.driver())
		if err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, stores[0], `SELECT COUNT(*) FROM schema_migrations`); n != len(ms) {
			t.Errorf("schema_migrations has %d rows, want %d", n, len(ms))
		}
		mustSession(t, stores[opens-1], "acme", "s1")
	})
}

func TestSchemaNewerThanBinaryFails(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s := open(t, db)
		execSQL(t, s, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)`)
		s.Close()
		_, err := db.openStore()
		if !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("opening a newer schema: err = %v, want ErrSchemaTooNew", err)
		}
		t.Log(err)
	})
}

func TestMigrationFailureRollsBackWhole(t *testing.T) {
	ctx := context.Background()
	fsys := fstest.MapFS{
		"m/0001_one.sql": {Data: []byte(`CREATE TABLE one (x INTEGER);`)},
		"m/0002_two.sql": {Data: []byte(`CREATE TABLE two (x INTEGER); CREATE TABLE broken (;`)},
	}
	ms, err := loadMigrations(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	forEachDB(t, func(t *testing.T, db testDB) {
		s := open(t, db)
		// A database with no schema_migrations yet stands in for a fresh one.
		execSQL(t, s, `DROP TABLE schema_migrations`)
		var (
			tables string
			err    error
		)
		switch s := s.(type) {
		case *SQLite:
			err = migrate(ctx, s.w, ms)
			tables = `SELECT COUNT(*) FROM sqlite_schema WHERE name IN ('one', 'two', 'schema_migrations')`
		case *Postgres:
			err = migratePostgres(ctx, s.pool, ms)
			tables = `SELECT COUNT(*) FROM information_schema.tables
				WHERE table_schema = current_schema() AND table_name IN ('one', 'two', 'schema_migrations')`
		}
		if err == nil {
			t.Fatal("migrate with a broken migration succeeded")
		}
		t.Log(err)
		if n := queryInt(t, s, tables); n != 0 {
			t.Errorf("%d tables of the failed migration run survived, want 0", n)
		}
	})
}

// TestMigrationsMatchAcrossDrivers keeps the drivers' schemas on one
// versioning scheme: the same versions, with the same names.
func TestMigrationsMatchAcrossDrivers(t *testing.T) {
	var names [][]string
	for _, d := range testDrivers {
		ms, err := loadMigrations(migrations, "migrations/"+d.name)
		if err != nil {
			t.Fatalf("%s: %v", d.name, err)
		}
		var ns []string
		for _, m := range ms {
			ns = append(ns, fmt.Sprintf("%04d_%s", m.version, m.name))
		}
		names = append(names, ns)
	}
	for i := 1; i < len(names); i++ {
		if !slices.Equal(names[i], names[0]) {
			t.Errorf("%s migrations %v, %s has %v", testDrivers[i].name, names[i], testDrivers[0].name, names[0])
		}
	}
}

func TestLoadMigrations(t *testing.T) {
	sql := []byte("SELECT 1;")
	tests := []struct {
		name    string
		files   []string
		wantErr bool
	}{
		{"in order", []string{"0001_init.sql", "0002_more.sql"}, false},
		{"gap", []string{"0001_init.sql", "0003_more.sql"}, true},
		{"repeat", []string{"0001_init.sql", "01_again.sql"}, true},
		{"starts at two", []string{"0002_init.sql"}, true},
		{"bad name", []string{"0001_Init.sql"}, true},
		{"not sql", []string{"0001_init.txt"}, true},
		{"empty", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for _, f := range tt.files {
				fsys["m/"+f] = &fstest.MapFile{Data: sql}
			}
			_, err := loadMigrations(fsys, "m")
			if (err != nil) != tt.wantErr {
				t.Errorf("loadMigrations: err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestPragmas(t *testing.T) {
	s, _ := openTest(t)
	for _, db := range []struct {
		name string
		q    *sql.DB
	}{{"writer", s.w}, {"reader", s.r}} {
		var mode string
		var fk, busy, secure int
		if err := db.q.QueryRowContext(context.Background(), `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := db.q.QueryRowContext(context.Background(), `PRAGMA secure_delete`).Scan(&secure); err != nil {
			t.Fatal(err)
		}
		if secure != 1 {
			t.Errorf("%s: secure_delete=%d, want 1 (erased rows are overwritten)", db.name, secure)
		}
		if err := db.q.QueryRowContext(context.Background(), `PRAGMA foreign_keys`).Scan(&fk); err != nil {
			t.Fatal(err)
		}
		if err := db.q.QueryRowContext(context.Background(), `PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || fk != 1 || busy != busyTimeoutMillis {
			t.Errorf("%s: journal_mode=%s foreign_keys=%d busy_timeout=%d, want wal 1 %d", db.name, mode, fk, busy, busyTimeoutMillis)
		}
	}
	if _, err := s.r.Exec(`DELETE FROM sessions`); err == nil {
		t.Error("a write through the read-only pool succeeded")
	}
}

func TestOpenRejectsNonFiles(t *testing.T) {
	for _, path := range []string{"", ":memory:"} {
		if _, err := OpenSQLite(path); !errors.Is(err, ErrInvalid) {
			t.Errorf("OpenSQLite(%q): err = %v, want ErrInvalid", path, err)
		}
	}
}

func TestOpenOddPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a dir?#%", "db 1.sqlite")
	s, err := OpenSQLite(path)
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	defer s.Close()
	mustSession(t, s, "t", "s")
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database is not at the given path: %v", err)
	}
}

func TestSessions(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		sess, created, err := s.GetOrCreateSession(ctx, "acme", "demo", "s1")
		if err != nil || !created {
			t.Fatalf("first GetOrCreateSession: created=%v err=%v, want created", created, err)
		}
		if sess.ID != "s1" || sess.Tenant != "acme" || sess.Agent != "demo" || sess.LastBody != nil || sess.CreatedAt.IsZero() {
			t.Errorf("session = %+v", sess)
		}
		again, created, err := s.GetOrCreateSession(ctx, "acme", "other-agent", "s1")
		if err != nil || created {
			t.Fatalf("second GetOrCreateSession: created=%v err=%v, want found", created, err)
		}
		if again.Agent != "demo" || !again.CreatedAt.Equal(sess.CreatedAt) {
			t.Errorf("second GetOrCreateSession = %+v, want the stored session", again)
		}

		body := json.RawMessage(`{"temperature":0.2,"locale":"fr"}`)
		if err := s.SetLastBody(ctx, "acme", "s1", body); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSession(ctx, "acme", "s1")
		if err != nil {
			t.Fatal(err)
		}
		if string(got.LastBody) != string(body) {
			t.Errorf("LastBody = %s, want %s", got.LastBody, body)
		}
		if got.UpdatedAt.Before(sess.UpdatedAt) {
			t.Errorf("UpdatedAt went back: %v before %v", got.UpdatedAt, sess.UpdatedAt)
		}
		if err := s.SetLastBody(ctx, "acme", "s1", nil); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetSession(ctx, "acme", "s1"); got.LastBody != nil {
			t.Errorf("LastBody after clearing = %s, want nil", got.LastBody)
		}

		invalid := []struct {
			name string
			call func() error
		}{
			{"empty tenant", func() error { _, _, err := s.GetOrCreateSession(ctx, "", "demo", "x"); return err }},
			{"empty agent", func() error { _, _, err := s.GetOrCreateSession(ctx, "acme", "", "x"); return err }},
			{"empty id", func() error { _, _, err := s.GetOrCreateSession(ctx, "acme", "demo", ""); return err }},
			{"body not JSON", func() error { return s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`{"a":`)) }},
		}
		for _, tt := range invalid {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, ErrInvalid) {
					t.Errorf("err = %v, want ErrInvalid", err)
				}
			})
		}
	})
}

func TestMessages(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		transcript := storeTranscript(t, s, "acme", "s1")
		got, err := s.Messages(ctx, "acme", "s1")
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, got, transcript)

		t.Run("empty session", func(t *testing.T) {
			mustSession(t, s, "acme", "empty")
			got, err := s.Messages(ctx, "acme", "empty")
			if err != nil || got == nil || len(got) != 0 {
				t.Errorf("Messages of an empty session = %v, %v; want an empty slice", got, err)
			}
		})
		t.Run("transcript with its session", func(t *testing.T) {
			if err := s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`{"plan":"pro"}`)); err != nil {
				t.Fatal(err)
			}
			sess, msgs, err := s.Transcript(ctx, "acme", "s1")
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.GetSession(ctx, "acme", "s1")
			if err != nil {
				t.Fatal(err)
			}
			assertJSON(t, sess, want)
			assertJSON(t, msgs, transcript)
			sess, msgs, err = s.Transcript(ctx, "acme", "empty")
			if err != nil || sess == nil || sess.ID != "empty" || msgs == nil || len(msgs) != 0 {
				t.Errorf("Transcript of an empty session = %+v, %v, %v; want the session and an empty slice", sess, msgs, err)
			}
			for _, tc := range []struct{ tenant, id string }{{"acme", "missing"}, {"globex", "s1"}} {
				if _, _, err := s.Transcript(ctx, tc.tenant, tc.id); !errors.Is(err, ErrNotFound) {
					t.Errorf("Transcript(%s, %s): err = %v, want ErrNotFound", tc.tenant, tc.id, err)
				}
			}
		})
		t.Run("append duplicate id", func(t *testing.T) {
			if err := s.AppendMessage(ctx, "acme", "s1", text("u1", "again")); !errors.Is(err, ErrConflict) {
				t.Errorf("err = %v, want ErrConflict", err)
			}
		})
		t.Run("append invalid", func(t *testing.T) {
			for _, m := range []engine.UIMessage{{Role: "user"}, {ID: "x"}} {
				if err := s.AppendMessage(ctx, "acme", "s1", m); !errors.Is(err, ErrInvalid) {
					t.Errorf("AppendMessage(%+v): err = %v, want ErrInvalid", m, err)
				}
			}
		})
		t.Run("upsert replaces in place", func(t *testing.T) {
			grown := transcript[1]
			grown.Parts = append(slices.Clone(grown.Parts), engine.UIPart{Type: engine.PartText, Text: "More.", State: engine.StateDone})
			if err := s.UpsertMessage(ctx, "acme", "s1", grown); err != nil {
				t.Fatal(err)
			}
			got, err := s.Messages(ctx, "acme", "s1")
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(transcript)
			want[1] = grown
			assertJSON(t, got, want)
		})
		t.Run("upsert appends when absent", func(t *testing.T) {
			if err := s.UpsertMessage(ctx, "acme", "s1", text("u3", "new")); err != nil {
				t.Fatal(err)
			}
			got, _ := s.Messages(ctx, "acme", "s1")
			if want := []string{"u1", "a1", "u2", "a2", "u3"}; !slices.Equal(ids(got), want) {
				t.Errorf("ids = %v, want %v", ids(got), want)
			}
		})

		truncates := []struct {
			name      string
			messageID string
			inclusive bool
			want      []string
			wantErr   error
		}{
			{"unknown message", "nope", false, []string{"u1", "a1", "u2", "a2", "u3"}, ErrNotFound},
			{"after a2", "a2", false, []string{"u1", "a1", "u2", "a2"}, nil},
			{"after last is a no-op", "a2", false, []string{"u1", "a1", "u2", "a2"}, nil},
			{"regenerate a2", "a2", true, []string{"u1", "a1", "u2"}, nil},
			{"edit u2", "u2", true, []string{"u1", "a1"}, nil},
			{"everything", "u1", true, []string{}, nil},
		}
		for _, tt := range truncates {
			t.Run("truncate "+tt.name, func(t *testing.T) {
				err := s.TruncateAfter(ctx, "acme", "s1", tt.messageID, tt.inclusive)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("TruncateAfter: err = %v, want %v", err, tt.wantErr)
				}
				got, _ := s.Messages(ctx, "acme", "s1")
				if !slices.Equal(ids(got), tt.want) {
					t.Errorf("ids = %v, want %v", ids(got), tt.want)
				}
			})
		}
		t.Run("positions are reused after truncation", func(t *testing.T) {
			for _, id := range []string{"u1", "a1"} {
				if err := s.AppendMessage(ctx, "acme", "s1", text(id, id)); err != nil {
					t.Fatal(err)
				}
			}
			got, _ := s.Messages(ctx, "acme", "s1")
			if want := []string{"u1", "a1"}; !slices.Equal(ids(got), want) {
				t.Errorf("ids = %v, want %v", ids(got), want)
			}
		})
	})
}

func TestTenantIsolation(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		mustSession(t, s, "a", "s1")
		if err := s.AppendMessage(ctx, "a", "s1", text("u1", "secret of a")); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLastBody(ctx, "a", "s1", json.RawMessage(`{"a":true}`)); err != nil {
			t.Fatal(err)
		}
		sub, _, err := s.CreateSubmission(ctx, &Submission{Tenant: "a", SessionID: "s1", Agent: "demo",
			IdempotencyKey: "k", Request: json.RawMessage(`{}`)}, QueueLimits{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RecordTurn(ctx, &TurnRecord{RequestID: "r1", Tenant: "a", SessionID: "s1", Agent: "demo", Status: "completed"}); err != nil {
			t.Fatal(err)
		}

		// Tenant b, and tenant a asking for a session it does not have, must see
		// exactly the same thing.
		for _, probe := range []struct{ tenant, session string }{{"b", "s1"}, {"a", "missing"}} {
			calls := []struct {
				name string
				call func() error
			}{
				{"GetSession", func() error { _, err := s.GetSession(ctx, probe.tenant, probe.session); return err }},
				{"SetLastBody", func() error { return s.SetLastBody(ctx, probe.tenant, probe.session, json.RawMessage(`{}`)) }},
				{"Messages", func() error { _, err := s.Messages(ctx, probe.tenant, probe.session); return err }},
				{"AppendMessage", func() error { return s.AppendMessage(ctx, probe.tenant, probe.session, text("x", "x")) }},
				{"UpsertMessage", func() error { return s.UpsertMessage(ctx, probe.tenant, probe.session, text("u1", "x")) }},
				{"TruncateAfter", func() error { return s.TruncateAfter(ctx, probe.tenant, probe.session, "u1", true) }},
				{"GetSubmission", func() error { _, err := s.GetSubmission(ctx, probe.tenant, probe.session, sub.ID); return err }},
			}
			for _, c := range calls {
				t.Run(probe.tenant+"/"+probe.session+"/"+c.name, func(t *testing.T) {
					if err := c.call(); !errors.Is(err, ErrNotFound) {
						t.Errorf("err = %v, want ErrNotFound", err)
					}
				})
			}
			turns, err := s.Turns(ctx, probe.tenant, probe.session)
			if err != nil || len(turns) != 0 {
				t.Errorf("Turns(%s, %s) = %v, %v; want none", probe.tenant, probe.session, turns, err)
			}
		}
		if _, err := s.GetSubmission(ctx, "a", "s1", sub.ID); err != nil {
			t.Errorf("GetSubmission by its owner: %v", err)
		}

		// Creating "s1" as b makes b's own session, with nothing of a's in it.
		bs, created, err := s.GetOrCreateSession(ctx, "b", "demo", "s1")
		if err != nil || !created || bs.LastBody != nil {
			t.Fatalf("GetOrCreateSession as b = %+v, %v, %v; want a new empty session", bs, created, err)
		}
		if msgs, err := s.Messages(ctx, "b", "s1"); err != nil || len(msgs) != 0 {
			t.Errorf("b's transcript = %v, %v; want empty", msgs, err)
		}
		bsub, existing, err := s.CreateSubmission(ctx, &Submission{Tenant: "b", SessionID: "s1", Agent: "demo",
			IdempotencyKey: "k", Request: json.RawMessage(`{}`)}, QueueLimits{})
		if err != nil || existing || bsub.ID == sub.ID {
			t.Errorf("CreateSubmission as b with a's key = %+v, existing=%v, %v; want a new submission", bsub, existing, err)
		}

		// a's data is untouched.
		msgs, err := s.Messages(ctx, "a", "s1")
		if err != nil || len(msgs) != 1 || msgs[0].Parts[0].Text != "secret of a" {
			t.Errorf("a's transcript = %v, %v", msgs, err)
		}
		as, _ := s.GetSession(ctx, "a", "s1")
		if string(as.LastBody) != `{"a":true}` {
			t.Errorf("a's last body = %s", as.LastBody)
		}
	})
}

// createSub queues a submission with an empty request.
func createSub(t testing.TB, s Store, tenant, session, key string) *Submission {
	t.Helper()
	sub, _, err := s.CreateSubmission(context.Background(), &Submission{Tenant: tenant, SessionID: session, Agent: "demo",
		IdempotencyKey: key, Request: json.RawMessage(`{"messages":[]}`)}, QueueLimits{})
	if err != nil {
		t.Fatalf("CreateSubmission: %v", err)
	}
	return sub
}

func TestSubmissionIdempotency(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		first := createSub(t, s, "acme", "s1", "key-1")
		if first.Status != StatusQueued || first.Attempts != 0 || first.ID == "" || first.Result != nil {
			t.Errorf("new submission = %+v", first)
		}
		if _, err := s.GetSession(ctx, "acme", "s1"); err != nil {
			t.Errorf("CreateSubmission did not create the session: %v", err)
		}
		again, existing, err := s.CreateSubmission(ctx, &Submission{Tenant: "acme", SessionID: "s1", Agent: "demo",
			IdempotencyKey: "key-1", Request: json.RawMessage(`{"different":true}`)}, QueueLimits{})
		if err != nil || !existing {
			t.Fatalf("repeated key: existing=%v err=%v, want existing", existing, err)
		}
		assertJSON(t, again, first)

		other := createSub(t, s, "acme", "s2", "key-1")
		if other.ID == first.ID {
			t.Error("the same key in another session returned the first submission")
		}
		a, b := createSub(t, s, "acme", "s1", ""), createSub(t, s, "acme", "s1", "")
		if a.ID == b.ID {
			t.Error("two submissions without a key share an id")
		}

		given := &Submission{ID: "sub-fixed", Tenant: "acme", SessionID: "s1", Agent: "demo", Request: json.RawMessage(`1`)}
		if got, _, err := s.CreateSubmission(ctx, given, QueueLimits{}); err != nil || got.ID != "sub-fixed" {
			t.Errorf("CreateSubmission with an id = %+v, %v", got, err)
		}
		if _, _, err := s.CreateSubmission(ctx, given, QueueLimits{}); !errors.Is(err, ErrConflict) {
			t.Errorf("CreateSubmission with a taken id: err = %v, want ErrConflict", err)
		}

		invalid := []struct {
			name string
			sub  Submission
		}{
			{"no tenant", Submission{SessionID: "s", Agent: "demo", Request: json.RawMessage(`{}`)}},
			{"no session", Submission{Tenant: "t", Agent: "demo", Request: json.RawMessage(`{}`)}},
			{"no agent", Submission{Tenant: "t", SessionID: "s", Request: json.RawMessage(`{}`)}},
			{"no request", Submission{Tenant: "t", SessionID: "s", Agent: "demo"}},
			{"request not JSON", Submission{Tenant: "t", SessionID: "s", Agent: "demo", Request: json.RawMessage(`{`)}},
		}
		for _, tt := range invalid {
			t.Run(tt.name, func(t *testing.T) {
				if _, _, err := s.CreateSubmission(ctx, &tt.sub, QueueLimits{}); !errors.Is(err, ErrInvalid) {
					t.Errorf("err = %v, want ErrInvalid", err)
				}
			})
		}
	})
}

// claim claims the next submission, failing the test on errors other than
// ErrNotFound, and returns its id or "".
func claim(t *testing.T, s Store) string {
	t.Helper()
	sub, err := s.ClaimSubmission(context.Background(), testOwner, testClaimTTL)
	if errors.Is(err, ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("ClaimSubmission: %v", err)
	}
	if sub.Status != StatusRunning {
		t.Errorf("claimed submission has status %s", sub.Status)
	}
	return sub.ID
}

// testOwner is the owner of the tests' claims and leases, and testClaimTTL
// the claims' TTL: longer than any test, so a claim expires only where a
// test makes it.
const (
	testOwner    = "replica-test"
	testClaimTTL = time.Hour
)

// claimOf returns the claim that finishes submission id: its attempts when
// it runs, 0 when it is queued.
func claimOf(t *testing.T, s Store, id string) int {
	t.Helper()
	return queryInt(t, s, "SELECT CASE WHEN status = 'running' THEN attempts ELSE 0 END FROM submissions WHERE id = '"+id+"'")
}

// finish completes submission id.
func finish(t *testing.T, s Store, id string) {
	t.Helper()
	if err := s.FinishSubmission(context.Background(), id, claimOf(t, s, id), StatusCompleted, json.RawMessage(`{"status":"completed"}`)); err != nil {
		t.Fatalf("FinishSubmission: %v", err)
	}
}

func TestClaimIsFIFOPerSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		a1 := createSub(t, s, "acme", "A", "")
		a2 := createSub(t, s, "acme", "A", "")
		b1 := createSub(t, s, "acme", "B", "")
		a3 := createSub(t, s, "acme", "A", "")
		other := createSub(t, s, "globex", "A", "") // same session id, another tenant: another session.

		steps := []struct {
			name   string
			finish string
			want   string
		}{
			{"oldest first", "", a1.ID},
			{"a2 waits for a1, b1 goes", "", b1.ID},
			{"another tenant's A is its own session", "", other.ID},
			{"nothing claimable", "", ""},
			{"a2 after a1 finishes", a1.ID, a2.ID},
			{"a3 waits for a2", "", ""},
			{"a3 after a2 finishes", a2.ID, a3.ID},
			{"drained", a3.ID, ""},
		}
		for _, st := range steps {
			if st.finish != "" {
				finish(t, s, st.finish)
			}
			if got := claim(t, s); got != st.want {
				t.Fatalf("%s: claimed %q, want %q", st.name, got, st.want)
			}
		}
	})
}

func TestSkipQueuedSubmission(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		sub := createSub(t, s, "acme", "A", "")
		if err := s.FinishSubmission(ctx, sub.ID, 0, StatusSkipped, nil); err != nil {
			t.Fatalf("skipping a queued submission: %v", err)
		}
		if got := claim(t, s); got != "" {
			t.Errorf("claimed skipped submission %s", got)
		}
	})
}

func TestFinishSubmission(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		sub := createSub(t, s, "acme", "A", "")
		claim(t, s)
		result := json.RawMessage(`{"messageId":"a1","status":"error","error":"upstream failed"}`)
		if err := s.FinishSubmission(ctx, sub.ID, 1, StatusError, result); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSubmission(ctx, "acme", "A", sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != StatusError || string(got.Result) != string(result) || got.Attempts != 1 || got.UpdatedAt.Before(got.CreatedAt) {
			t.Errorf("finished submission = %+v", got)
		}
		errs := []struct {
			name   string
			id     string
			status string
			result json.RawMessage
			want   error
		}{
			{"already finished", sub.ID, StatusCompleted, nil, ErrConflict},
			{"unknown id", "nope", StatusCompleted, nil, ErrNotFound},
			{"not a final status", sub.ID, StatusRunning, nil, ErrInvalid},
			{"unknown status", sub.ID, "done", nil, ErrInvalid},
			{"result not JSON", sub.ID, StatusCompleted, json.RawMessage(`{`), ErrInvalid},
		}
		for _, tt := range errs {
			t.Run(tt.name, func(t *testing.T) {
				if err := s.FinishSubmission(ctx, tt.id, 1, tt.status, tt.result); !errors.Is(err, tt.want) {
					t.Errorf("err = %v, want %v", err, tt.want)
				}
			})
		}
	})
}

// TestSetSubmissionRequest: the running submission's request is replaced
// under its claim; under another claim, or once finished, nothing is
// stored (ErrFenced), and a request that is not JSON is refused.
func TestSetSubmissionRequest(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		sub := createSub(t, s, "acme", "A", "")
		claim(t, s)
		masked := json.RawMessage(`{"messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"[card]"}]}]}`)
		for _, tt := range []struct {
			name    string
			claim   int
			request json.RawMessage
			want    error
		}{
			{"another claim", 2, masked, ErrFenced},
			{"not JSON", 1, json.RawMessage(`{`), ErrInvalid},
			{"its claim", 1, masked, nil},
		} {
			if err := s.SetSubmissionRequest(ctx, sub.ID, tt.claim, tt.request); !errors.Is(err, tt.want) {
				t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
			}
		}
		got, err := s.GetSubmission(ctx, "acme", "A", sub.ID)
		if err != nil || string(got.Request) != string(masked) {
			t.Errorf("stored request %s (%v), want %s", got.Request, err, masked)
		}
		if err := s.FinishSubmission(ctx, sub.ID, 1, StatusCompleted, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SetSubmissionRequest(ctx, sub.ID, 1, masked); !errors.Is(err, ErrFenced) {
			t.Errorf("a finished submission's request: err = %v, want ErrFenced", err)
		}
	})
}

// TestClaimConcurrentNoDoubleClaims claims from concurrent workers on two
// handles of one database, as two processes would.
func TestClaimConcurrentNoDoubleClaims(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		s, other := open(t, db), open(t, db)
		const (
			sessions   = 10
			perSession = 12
			claimers   = 8
		)
		ctx := context.Background()
		want := map[string][]string{} // session -> submission ids in creation order
		for i := range perSession {
			for j := range sessions {
				session := fmt.Sprintf("s%d", j)
				want[session] = append(want[session], createSub(t, s, "acme", session, fmt.Sprint(i)).ID)
			}
		}

		var (
			mu      sync.Mutex
			claimed = map[string][]string{} // session -> claims in order
			seen    = map[string]bool{}
			done    int
			wg      sync.WaitGroup
			errs    = make(chan error, claimers)
		)
		for c := range claimers {
			st := s
			if c%2 == 1 {
				st = other
			}
			wg.Go(func() {
				for {
					sub, err := st.ClaimSubmission(ctx, testOwner, testClaimTTL)
					if errors.Is(err, ErrNotFound) {
						mu.Lock()
						finished := done == sessions*perSession
						mu.Unlock()
						if finished {
							return
						}
						time.Sleep(time.Millisecond) // others hold the claimable work; wait for them.
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					if seen[sub.ID] {
						mu.Unlock()
						errs <- fmt.Errorf("submission %s claimed twice", sub.ID)
						return
					}
					seen[sub.ID] = true
					claimed[sub.SessionID] = append(claimed[sub.SessionID], sub.ID)
					mu.Unlock()
					if err := st.FinishSubmission(ctx, sub.ID, sub.Attempts, StatusCompleted, nil); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					done++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		for session, ids := range want {
			if !slices.Equal(claimed[session], ids) {
				t.Errorf("session %s claimed in order %v, want %v", session, claimed[session], ids)
			}
		}
	})
}

func TestRequeueAfterCrash(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s := open(t, db)
		first := createSub(t, s, "acme", "A", "k1")
		second := createSub(t, s, "acme", "A", "k2")
		if got := claim(t, s); got != first.ID {
			t.Fatalf("claimed %s, want %s", got, first.ID)
		}
		// The process dies: the store closes with first still running.
		s = reopen(t, db, s)
		if got := claim(t, s); got != "" {
			t.Fatalf("claimed %s while the crashed submission is still running", got)
		}
		n, err := s.RequeueRunning(ctx)
		// SQLite's file serves one process: what runs at startup is a dead
		// process's. On PostgreSQL another replica may run it: only an
		// expired claim is requeued.
		want := map[string]int{"sqlite": 1, "postgres": 0}[db.driver()]
		if err != nil || n != want {
			t.Fatalf("RequeueRunning = %d, %v; want %d", n, err, want)
		}
		if db.driver() == "postgres" {
			execSQL(t, s, "UPDATE submissions SET lease_until = 0 WHERE id = '"+first.ID+"'") // the claim expires
		}
		sub, err := s.ClaimSubmission(ctx, testOwner, testClaimTTL)
		if err != nil {
			t.Fatal(err)
		}
		if sub.ID != first.ID || sub.Attempts != 2 {
			t.Errorf("claimed %s with %d attempts, want %s with 2", sub.ID, sub.Attempts, first.ID)
		}
		finish(t, s, first.ID)
		if got := claim(t, s); got != second.ID {
			t.Errorf("claimed %q, want %s", got, second.ID)
		}
		want = map[string]int{"sqlite": 1, "postgres": 0}[db.driver()]
		if n, err := s.RequeueRunning(ctx); err != nil || n != want {
			t.Errorf("RequeueRunning = %d, %v; want %d", n, err, want)
		}
	})
}

func TestConcurrentWriters(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		const (
			writers   = 64
			perWriter = 5
		)
		ctx := context.Background()
		s := open(t, db)
		// A second handle on the same database: on SQLite it shares the
		// file's one writer (OpenSQLite), on PostgreSQL it stands in for
		// another replica, its writes contending for the session's row.
		other := open(t, db)
		mustSession(t, s, "acme", "shared")

		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			st := s
			if w%4 == 0 {
				st = other
			}
			wg.Go(func() {
				err := func() error {
					session := fmt.Sprintf("own-%d", w)
					if _, _, err := st.GetOrCreateSession(ctx, "acme", "demo", session); err != nil {
						return err
					}
					for i := range perWriter {
						if err := st.AppendMessage(ctx, "acme", session, text(fmt.Sprint(i), "hi")); err != nil {
							return err
						}
						if err := st.UpsertMessage(ctx, "acme", "shared", text(fmt.Sprintf("%d-%d", w, i), "hi")); err != nil {
							return err
						}
						if err := st.SetLastBody(ctx, "acme", session, json.RawMessage(fmt.Sprint(i))); err != nil {
							return err
						}
						if err := st.RecordTurn(ctx, &TurnRecord{RequestID: fmt.Sprint(i), Tenant: "acme", SessionID: session, Agent: "demo", Status: "completed"}); err != nil {
							return err
						}
						if _, _, err := st.CreateSubmission(ctx, &Submission{Tenant: "acme", SessionID: session, Agent: "demo", IdempotencyKey: "same", Request: json.RawMessage(`{}`)}, QueueLimits{}); err != nil {
							return err
						}
					}
					return nil
				}()
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		msgs, err := s.Messages(ctx, "acme", "shared")
		if err != nil || len(msgs) != writers*perWriter {
			t.Errorf("shared session has %d messages (%v), want %d", len(msgs), err, writers*perWriter)
		}
		for w := range writers {
			session := fmt.Sprintf("own-%d", w)
			msgs, err := s.Messages(ctx, "acme", session)
			if err != nil || len(msgs) != perWriter {
				t.Errorf("%s has %d messages (%v), want %d", session, len(msgs), err, perWriter)
			}
			turns, err := s.Turns(ctx, "acme", session)
			if err != nil || len(turns) != perWriter {
				t.Errorf("%s has %d turns (%v), want %d", session, len(turns), err, perWriter)
			}
		}
	})
}

func TestTurns(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		start := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
		want := []TurnRecord{
			{RequestID: "r1", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "completed", FinishReason: "stop",
				Usage: engine.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15, CachedInputTokens: 2}, RuleRevision: "sha256:abc",
				StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond)},
			{RequestID: "r2", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "error", FinishReason: "error",
				Error: "upstream failed", RuleRevision: "sha256:abc"},
		}
		for i := range want {
			if err := s.RecordTurn(ctx, &want[i]); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Turns(ctx, "acme", "s1")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, want, func(a, b TurnRecord) bool {
			return a.RequestID == b.RequestID && a.Status == b.Status && a.Error == b.Error && a.FinishReason == b.FinishReason &&
				a.Usage == b.Usage && a.RuleRevision == b.RuleRevision && a.Tenant == b.Tenant && a.SessionID == b.SessionID &&
				a.Agent == b.Agent && a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt)
		}) {
			t.Errorf("Turns = %+v\nwant %+v", got, want)
		}
	})
}

func TestDataSurvivesReopen(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		ctx := context.Background()
		s := open(t, db)
		transcript := storeTranscript(t, s, "acme", "s1")
		if err := s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`{"x":1}`)); err != nil {
			t.Fatal(err)
		}
		sub := createSub(t, s, "acme", "s1", "k")
		if err := s.RecordTurn(ctx, &TurnRecord{RequestID: "r1", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "completed"}); err != nil {
			t.Fatal(err)
		}
		before, _ := s.GetSession(ctx, "acme", "s1")

		s = reopen(t, db, s)
		after, err := s.GetSession(ctx, "acme", "s1")
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, after, before)
		msgs, err := s.Messages(ctx, "acme", "s1")
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, msgs, transcript)
		got, err := s.GetSubmission(ctx, "acme", "s1", sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, got, sub)
		if turns, err := s.Turns(ctx, "acme", "s1"); err != nil || len(turns) != 1 {
			t.Errorf("Turns after reopen = %v, %v", turns, err)
		}
	})
}

func TestContextCancelled(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := s.GetOrCreateSession(ctx, "acme", "demo", "s1"); !errors.Is(err, context.Canceled) {
			t.Errorf("GetOrCreateSession with a cancelled context: err = %v, want context.Canceled", err)
		}
		if err := s.AppendMessage(ctx, "acme", "s1", text("u1", "x")); !errors.Is(err, context.Canceled) {
			t.Errorf("AppendMessage with a cancelled context: err = %v, want context.Canceled", err)
		}
	})
}

func BenchmarkAppendMessage(b *testing.B) {
	benchEachDB(b, func(b *testing.B, db testDB) {
		ctx := context.Background()
		s := open(b, db)
		mustSession(b, s, "acme", "s1")
		m := text("", "What is the weather in Paris today, and should I take an umbrella?")
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.ID = fmt.Sprint(i)
			if err := s.AppendMessage(ctx, "acme", "s1", m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkRecordTurn(b *testing.B) {
	benchEachDB(b, func(b *testing.B, db testDB) {
		ctx := context.Background()
		s := open(b, db)
		now := time.Now()
		rec := &TurnRecord{RequestID: "r", Tenant: "acme", SessionID: "s1", Agent: "demo", Status: "completed", FinishReason: "stop",
			Usage: engine.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}, RuleRevision: "sha256:abc",
			StartedAt: now, FinishedAt: now}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.RecordTurn(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMessages(b *testing.B) {
	benchEachDB(b, func(b *testing.B, db testDB) {
		ctx := context.Background()
		s := open(b, db)
		mustSession(b, s, "acme", "s1")
		for i := range 50 {
			if err := s.AppendMessage(ctx, "acme", "s1", text(fmt.Sprint(i), "A message of moderate length for the benchmark.")); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Messages(ctx, "acme", "s1"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestSQLiteOneWriterPerFile: the stores a process opens on one SQLite
// file share its writer and its transcript cache, so one's writes are the
// other's reads (two writers on one file contended for SQLite's lock, and
// under CPU starvation one failed with SQLITE_BUSY); closing one leaves the
// other open; and while the file is open another process cannot open it.
func TestSQLiteOneWriterPerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "turngate.db")
	a, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.sqliteFile != b.sqliteFile {
		t.Fatal("two stores on one file have writers of their own")
	}
	ctx := context.Background()
	mustSession(t, a, "acme", "s1")
	if _, _, err := b.Transcript(ctx, "acme", "s1"); err != nil { // cached on b
		t.Fatal(err)
	}
	if err := a.AppendMessage(ctx, "acme", "s1", text("m1", "hi")); err != nil {
		t.Fatal(err)
	}
	if msgs, err := b.Messages(ctx, "acme", "s1"); err != nil || len(msgs) != 1 {
		t.Errorf("b's transcript after a's append = %v, %v; want the message", msgs, err)
	}
	if _, err := OpenSQLite(path, WithSynchronous(SynchronousNormal)); !errors.Is(err, ErrInvalid) {
		t.Errorf("opening the open file with other options: err = %v, want ErrInvalid", err)
	}
	if _, err := lockFile(path); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Errorf("another open file description locking it (as another process would): err = %v, want in use", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // a second Close of a handle does nothing
		t.Fatal(err)
	}
	if err := b.AppendMessage(ctx, "acme", "s1", text("m2", "again")); err != nil {
		t.Errorf("b after a's Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	lock, err := lockFile(path)
	if err != nil {
		t.Fatalf("the file is still locked after its last store closed: %v", err)
	}
	lock.Close()
	c, err := OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if msgs, err := c.Messages(ctx, "acme", "s1"); err != nil || len(msgs) != 2 {
		t.Errorf("reopened: %d messages, %v; want 2", len(msgs), err)
	}
}
