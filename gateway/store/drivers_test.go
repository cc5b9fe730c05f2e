package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/turngate/turngate/gateway/store/storetest"
)

// defaultTestPGDSN is the PostgreSQL database of the tests (see storetest).
const defaultTestPGDSN = storetest.DefaultDSN

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
	r.once.Do(func() { r.s, r.err = db.openStore(withTranscriptCache(0, 0), withIndependentFile()) })
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

// freshPostgres is a schema of its own (storetest.Schema), dropped with
// everything in it when the test ends.
func freshPostgres(tb testing.TB) testDB {
	tb.Helper()
	d := postgresDB{storetest.Schema(tb), &referenceStore{}}
	tb.Cleanup(d.ref.close) // before the schema is dropped
	return d
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
