package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Stores a started gateway can run on (-store).
const (
	storeSQLite   = "sqlite"
	storePostgres = "postgres"
)

// defaultPGDSN is the PostgreSQL server -store postgres creates its
// database on: the machine's local server, trust auth.
const defaultPGDSN = "postgres://postgres@127.0.0.1:5432/postgres"

// pgTarget is the PostgreSQL database a started gateway's replicas share:
// created fresh for the run (so pg_stat_database counts only their
// transactions) and dropped at the end. admin is a connection to the
// server's maintenance database, which the samples use.
type pgTarget struct {
	admin *pgx.Conn
	db    string
	// dsn is the replicas' DSN: the -pg-dsn server, database db.
	dsn string
}

// openPG creates the run's database on the server of adminDSN.
func openPG(ctx context.Context, adminDSN string) (*pgTarget, error) {
	u, err := url.Parse(adminDSN)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("-pg-dsn %q is not a postgres:// URL", adminDSN)
	}
	admin, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	db := fmt.Sprintf("turngate_load_%d_%d", os.Getpid(), time.Now().Unix())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		admin.Close(ctx)
		return nil, fmt.Errorf("creating database %s: %w", db, err)
	}
	u.Path = "/" + db
	q := u.Query()
	q.Set("application_name", "turngate-load")
	u.RawQuery = q.Encode()
	return &pgTarget{admin: admin, db: db, dsn: u.String()}, nil
}

// close drops the run's database.
func (pg *pgTarget) close() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	_, _ = pg.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pg.db+" WITH (FORCE)")
	pg.admin.Close(ctx)
}

// pgSample is one sample of the run's database: the CPU time of the
// server processes serving its connections and its transactions so far.
type pgSample struct {
	cpu    map[int]time.Duration // per backend pid
	xacts  int64
	tuples int64 // rows inserted, updated and deleted
}

// sample reads pg_stat_database and the CPU time of the backends
// connected to the run's database (from /proc: the server runs on this
// machine). Counters lag by up to PostgreSQL's stats flush interval (1 s).
func (pg *pgTarget) sample(ctx context.Context) (pgSample, error) {
	s := pgSample{cpu: map[int]time.Duration{}}
	err := pg.admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback, tup_inserted + tup_updated + tup_deleted
		FROM pg_stat_database WHERE datname = $1`, pg.db).Scan(&s.xacts, &s.tuples)
	if err != nil {
		return s, fmt.Errorf("reading pg_stat_database: %w", err)
	}
	rows, err := pg.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, pg.db)
	if err != nil {
		return s, fmt.Errorf("reading pg_stat_activity: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return s, fmt.Errorf("reading pg_stat_activity: %w", err)
	}
	for _, pid := range pids {
		if st, err := readProc(int(pid)); err == nil {
			s.cpu[int(pid)] = st.CPU
		}
	}
	return s, nil
}

// pgRun is the database over the measured window.
type pgRun struct {
	// Backends is how many server processes served the replicas.
	Backends   int     `json:"backends"`
	CPUSeconds float64 `json:"cpuSeconds"`
	CPUPerOpMs float64 `json:"cpuPerTurnMs"`
	// XactsPerTurn is transactions (commits and rollbacks) per turn: with
	// chunks per step varied, it shows whether the hot path makes a
	// database round trip per chunk.
	XactsPerTurn float64 `json:"xactsPerTurn"`
	// RowsPerTurn is rows inserted, updated or deleted per turn.
	RowsPerTurn float64 `json:"rowsPerTurn"`
}

// pgWindow describes the database between two samples. A backend that
// started during the window counts with all its CPU time; one that ended
// during it is missed (the replicas' pools keep their connections).
func pgWindow(a, b pgSample, turns int) *pgRun {
	r := &pgRun{Backends: len(b.cpu)}
	var cpu time.Duration
	for pid, t := range b.cpu {
		cpu += t - a.cpu[pid]
	}
	r.CPUSeconds = cpu.Seconds()
	if turns > 0 {
		r.CPUPerOpMs = r.CPUSeconds * 1000 / float64(turns)
		r.XactsPerTurn = float64(b.xacts-a.xacts) / float64(turns)
		r.RowsPerTurn = float64(b.tuples-a.tuples) / float64(turns)
	}
	return r
}

func (r *pgRun) rows(row func(string, string, ...any)) {
	if r == nil {
		return
	}
	row("postgres CPU", "%.2f s (%d backends), %.3f ms per turn", r.CPUSeconds, r.Backends, r.CPUPerOpMs)
	row("postgres transactions", "%.1f per turn, %.1f rows written per turn", r.XactsPerTurn, r.RowsPerTurn)
}

// storeYAML is the started gateway's store block.
func storeYAML(p *params, dir string, pg *pgTarget) string {
	if pg != nil {
		return "driver: postgres\n  dsn: " + strconv.Quote(pg.dsn)
	}
	return "driver: sqlite\n  path: " + dbPath(dir, p)
}

// replicaBase returns the base URL a request goes to: a random replica's
// for chat turns (clients spread over the replicas), the first one's for
// everything else.
func (gw *gateway) replicaBase(method, path string) string {
	if len(gw.bases) > 1 && method == "POST" && strings.HasSuffix(path, "/chat") {
		return gw.bases[rand.IntN(len(gw.bases))]
	}
	return gw.base
}

// sampleAll sums the CPU time and memory of every replica.
func (gw *gateway) sampleAll(ctx context.Context) (procStat, error) {
	if len(gw.pids) <= 1 {
		return gw.sample(ctx)
	}
	var sum procStat
	var errs []error
	for _, pid := range gw.pids {
		s, err := readProc(pid)
		errs = append(errs, err)
		sum.CPU += s.CPU
		sum.RSS += s.RSS
		sum.HWM += s.HWM
	}
	return sum, errors.Join(errs...)
}
