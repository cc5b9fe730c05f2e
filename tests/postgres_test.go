package tests

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// pgSchema creates a uniquely named schema in the tests' PostgreSQL
// database (TURNGATE_TEST_PG_DSN, default the local server's "test"
// database), dropped when the test ends, and returns a DSN whose
// search_path is that schema, the schema and a connection to the
// database. An unreachable server fails the test: the
// PostgreSQL tests are never skipped.
func pgSchema(t *testing.T) (dsn, schema string, conn *pgx.Conn) {
	t.Helper()
	base := cmp.Or(os.Getenv("TURNGATE_TEST_PG_DSN"), "postgres://postgres@127.0.0.1:5432/test")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("PostgreSQL at %s (TURNGATE_TEST_PG_DSN) is unreachable: %v\n"+
			"Start it: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start (.ci/run does)", base, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema = "e2e_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
		conn.Close(context.Background())
	})
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("TURNGATE_TEST_PG_DSN %q is not a postgres:// URL", base)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema, conn
}

// TestPostgresStore runs the built gateway with store.driver: postgres: a
// chat turn with a tool call, stored in the database, then a durable
// submission that survives SIGKILL and a restart on the same database.
func TestPostgresStore(t *testing.T) {
	dir := fixture(t, "e2e")
	pg, schema, conn := usePostgres(t, dir)
	gt := startGate(t)
	g := startGateway(t, gatewayOptions{
		Config: "turngate.yaml",
		Dir:    dir,
		Env:    append(pg, "TURNGATE_TEST_GATE_URL="+gt.URL),
	})
	t.Cleanup(gt.release)
	if !strings.Contains(g.Stderr.String(), "driver=postgres") {
		t.Errorf("the gateway did not log opening the postgres store:\n%s", g.Stderr)
	}

	s := g.chat("demo", userChat("pg-chat-1", "u1", "What is the weather in Oslo?", nil))
	if tc, ok := s.toolCall("weather"); !ok || !strings.Contains(string(tc.Output), `"Oslo"`) {
		t.Fatalf("no weather tool output in the stream:\n%s", s)
	}
	msgs := g.history("demo", "pg-chat-1")
	if len(msgs) != 2 || msgs[0].Role != "user" || msgs[1].Role != "assistant" || msgs[1].ID != s.messageID() {
		t.Fatalf("history = %+v, want the user message and the streamed answer", msgs)
	}
	var stored int
	if err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM `+schema+`.messages m
		JOIN `+schema+`.sessions s ON s.pk = m.session_pk WHERE s.id = 'pg-chat-1'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 2 {
		t.Errorf("the database holds %d messages of the session, want 2", stored)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "turngate.db")); err == nil {
		t.Error("the gateway created a SQLite file with store.driver: postgres")
	}

	submissionSurvivesKill(t, g, gt, "pg-durable-1")
}
