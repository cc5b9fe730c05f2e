// Package storetest gives tests a PostgreSQL schema of their own on the
// machine's test database, so the store's tests and the gateway's run on
// PostgreSQL in parallel without seeing each other's rows.
package storetest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultDSN is the tests' PostgreSQL database: the machine's local server,
// trust auth. TURNGATE_TEST_PG_DSN overrides it.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test"

// DSN returns the tests' PostgreSQL DSN.
func DSN() string {
	return cmp.Or(os.Getenv("TURNGATE_TEST_PG_DSN"), DefaultDSN)
}

// admin is the tests' connection pool for creating and dropping schemas.
var admin = sync.OnceValues(func() (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(context.Background(), DSN())
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(context.Background()); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
})

// Schema creates a uniquely named schema, dropped with everything in it
// when the test ends, and returns the DSN of a connection to it (its
// search_path). An unreachable server fails the test: the PostgreSQL tests
// are never skipped. The cleanups of stores opened on the DSN after this
// call run before the drop.
func Schema(tb testing.TB) string {
	tb.Helper()
	pool, err := admin()
	if err != nil {
		tb.Fatalf("PostgreSQL at %s (TURNGATE_TEST_PG_DSN) is unreachable: %v\n"+
			"Start it: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start (.ci/run does)", DSN(), err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "store_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("creating schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(tb, DSN(), schema)
}

// WithSearchPath returns dsn, a URL or key=value pairs, with search_path
// set to schema. A test's commits also do not wait for the server's WAL
// flush (synchronous_commit=off): the tests close their stores before
// reading what a restart reads, and a commit's disk sync is a few
// milliseconds on a busy machine, times thousands of commits. Benchmarks
// keep the server's default (on), the durability SQLite's full matches.
func WithSearchPath(tb testing.TB, dsn, schema string) string {
	tb.Helper()
	params := [][2]string{{"search_path", schema}}
	if _, bench := tb.(*testing.B); !bench {
		params = append(params, [2]string{"synchronous_commit", "off"})
	}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		for _, p := range params {
			dsn += " " + p[0] + "=" + p[1]
		}
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("TURNGATE_TEST_PG_DSN: %v", err)
	}
	q := u.Query()
	for _, p := range params {
		q.Set(p[0], p[1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}
