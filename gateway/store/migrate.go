package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"time"
)

// migrations holds the schema of each driver, one file per version in
// migrations/<driver>/: the same version numbers name the same change on
// both drivers.
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// migration is one schema version: the file NNNN_name.sql.
type migration struct {
	version int
	name    string
	sql     string
}

// migrationName matches a migration file name: a version and a snake_case name.
var migrationName = regexp.MustCompile(`^([0-9]+)_([a-z0-9_]+)\.sql$`)

// loadMigrations reads the migrations in dir of fsys, in version order. The
// versions must run 1, 2, 3… without gaps or repeats.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("reading migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries { // ReadDir sorts by name; zero-padded names sort by version.
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("reading migrations: %s: name is not NNNN_name.sql", e.Name())
		}
		version, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("reading migrations: %s: version: %w", e.Name(), err)
		}
		if want := len(ms) + 1; version != want {
			return nil, fmt.Errorf("reading migrations: %s: version %d, want %d", e.Name(), version, want)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading migrations: %w", err)
		}
		ms = append(ms, migration{version: version, name: m[2], sql: string(body)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("reading migrations: none in %s", dir)
	}
	return ms, nil
}

// migrate applies the migrations newer than the database's version, all in
// one transaction, and records each in schema_migrations. A database whose
// version is above the newest migration fails with ErrSchemaTooNew.
func migrate(ctx context.Context, db *sql.DB, ms []migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrating: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit.

	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("migrating: creating schema_migrations: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("migrating: reading version: %w", err)
	}
	todo, err := pending(ms, current)
	if err != nil {
		return err
	}
	for _, m := range todo {
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrating: applying %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("migrating: recording %04d_%s: %w", m.version, m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrating: committing: %w", err)
	}
	return nil
}

// pending returns the migrations of ms newer than the database's version
// current; ErrSchemaTooNew when current is above the newest of ms.
func pending(ms []migration, current int) ([]migration, error) {
	latest := ms[len(ms)-1].version
	if current > latest {
		return nil, fmt.Errorf("%w: database is at version %d, this binary knows versions up to %d", ErrSchemaTooNew, current, latest)
	}
	return ms[current:], nil
}
