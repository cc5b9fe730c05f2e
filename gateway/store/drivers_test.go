package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultTestPGDSN is the PostgreSQL database of the tests: the machine's
// local server, trust auth. TURNGATE_TEST_PG_DSN overrides it.
const defaultTestPGDSN = "postgres://postgres@127.0.0.1:5432/test"

// testPGDSN returns the tests' PostgreSQL DSN.
func testPGDSN() string {
	return cmp.Or(os.Getenv("TURNGATE_TEST_PG_DSN"), defaultTestPGDSN)
}

// testDB is a fresh database of one driver, its own: a SQLite file or a
// PostgreSQL schema.
type testDB interface {
	// driver names the driver: its migrations are in migrations/<driver>.
	driver() string
	// openStore opens a store on the database.
	openStore(opts ...Option) (Store, error)
	// reference returns a store without a cache on the database, opened
	// the first time and closed when the database's test ends.
	reference() (Store, error)
}

// referenceStore is a testDB's reference store.
type referenceStore struct {
	once sync.Once
	s    Store
	err  error
}

// get opens the reference store on db the first time.
func (r *referenceStore) get(db testDB) (Store, error) {
	r.once.Do(func() { r.s, r.err = db.openStore(withTranscriptCache(0, 0)) })
	return r.s, r.err
}

// close closes the reference store if it was opened.
func (r *referenceStore) close() {
	if r.s != nil {
		r.s.Close()
	}
}

// testDriver makes fresh databases of one driver, or one setup of it.
type testDriver struct {
	name  string
	fresh func(tb testing.TB) testDB
}

// testDrivers make the fresh databases the store's tests run on.
var testDrivers = []testDriver{
	{"sqlite", freshSQLite},
	{"postgres", freshPostgres},
}

// forEachDB runs f in a subtest per driver, in parallel, each on a fresh
// database.
func forEachDB(t *testing.T, f func(t *testing.T, db testDB)) {
	t.Helper()
	for _, d := range testDrivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			f(t, d.fresh(t))
		})
	}
}

// forEachStore runs f in a subtest per driver, in parallel, each with a
// store on a fresh database.
func forEachStore(t *testing.T, f func(t *testing.T, s Store)) {
	t.Helper()
	forEachDB(t, func(t *testing.T, db testDB) { f(t, open(t, db)) })
}

// benchEachDB runs f in a sub-benchmark per driver, each on a fresh
// database.
func benchEachDB(b *testing.B, f func(b *testing.B, db testDB)) {
	for _, d := range testDrivers {
		b.Run(d.name, func(b *testing.B) { f(b, d.fresh(b)) })
	}
}

// open opens a store on db and closes it when the test ends.
func open(tb testing.TB, db testDB, opts ...Option) Store {
	tb.Helper()
	s, err := db.openStore(opts...)
	if err != nil {
		tb.Fatalf("opening the %s store: %v", db.driver(), err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// reopen closes s and opens db again, as a restarted process would.
func reopen(t *testing.T, db testDB, s Store) Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return open(t, db)
}

// sqliteDB is a SQLite file.
type sqliteDB struct {
	path string
	ref  *referenceStore
}

func freshSQLite(tb testing.TB) testDB {
	return newSQLiteDB(tb, filepath.Join(tb.TempDir(), "data", "turngate.db"))
}

// newSQLiteDB is the SQLite file at path, which the test owns.
func newSQLiteDB(tb testing.TB, path string) sqliteDB {
	d := sqliteDB{path, &referenceStore{}}
	tb.Cleanup(d.ref.close)
	return d
}

func (sqliteDB) driver() string { return "sqlite" }

func (d sqliteDB) reference() (Store, error) { return d.ref.get(d) }

func (d sqliteDB) openStore(opts ...Option) (Store, error) {
	s, err := OpenSQLite(d.path, opts...)
	if err != nil {
		return nil, err // not a nil *SQLite in a Store
	}
	return s, nil
}

// postgresDB is a schema of its own in the tests' PostgreSQL database: the
// store's DSN sets search_path to it.
type postgresDB struct {
	dsn string
	ref *referenceStore
}

// pgAdmin is the tests' connection pool for creating and dropping schemas.
var pgAdmin = sync.OnceValues(func() (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(context.Background(), testPGDSN())
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(context.Background()); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
})

// freshPostgres creates a uniquely named schema, dropped with everything in
// it when the test ends. An unreachable server fails the test: the
// PostgreSQL tests are never skipped.
func freshPostgres(tb testing.TB) testDB {
	tb.Helper()
	admin, err := pgAdmin()
	if err != nil {
		tb.Fatalf("PostgreSQL at %s (TURNGATE_TEST_PG_DSN) is unreachable: %v\n"+
			"Start it: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start (.ci/run does)", testPGDSN(), err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "store_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("creating schema %s: %v", schema, err)
	}
	tb.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	d := postgresDB{withSearchPath(tb, testPGDSN(), schema), &referenceStore{}}
	tb.Cleanup(d.ref.close) // before the schema is dropped
	return d
}

// withSearchPath returns dsn, a URL or key=value pairs, with search_path
// set to schema. A test's commits also do not wait for the server's WAL
// flush (synchronous_commit=off): the tests close their stores before
// reading what a restart reads, and a commit's disk sync is a few
// milliseconds on a busy machine, times thousands of commits. Benchmarks
// keep the server's default (on), the durability SQLite's full matches.
func withSearchPath(tb testing.TB, dsn, schema string) string {
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

func (postgresDB) driver() string { return "postgres" }

func (d postgresDB) reference() (Store, error) { return d.ref.get(d) }

func (d postgresDB) openStore(opts ...Option) (Store, error) {
	s, err := OpenPostgres(context.Background(), d.dsn, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// layer returns the transcripts layer of s, either driver's.
func layer(s Store) *transcripts {
	switch s := s.(type) {
	case *SQLite:
		return &s.transcripts
	case *Postgres:
		return &s.transcripts
	}
	panic("unknown store")
}

// queryInt runs q, a query of one integer, on s's database.
func queryInt(t *testing.T, s Store, q string) int {
	t.Helper()
	var n int
	var err error
	switch s := s.(type) {
	case *SQLite:
		err = s.w.QueryRowContext(context.Background(), q).Scan(&n)
	case *Postgres:
		err = s.pool.QueryRow(context.Background(), q).Scan(&n)
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// execSQL runs q, a statement, on s's database.
func execSQL(t *testing.T, s Store, q string) {
	t.Helper()
	var err error
	switch s := s.(type) {
	case *SQLite:
		_, err = s.w.ExecContext(context.Background(), q)
	case *Postgres:
		_, err = s.pool.Exec(context.Background(), q)
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
