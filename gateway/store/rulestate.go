package store

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"
)

// StateStore keeps the counts of declared rule state (migrations 0011, 0012;
// policy/state declares the states, gateway/rulestate computes their
// values), aggregated per scope key, time bucket, outcome and item. Both
// drivers implement it: SQLite serialises every admission through its one
// writer, PostgreSQL per scope key with advisory locks, so on either a
// state read by one admission counts every admission of the same key
// before it, on every replica.
type StateStore interface {
	// AdmitState reads a.Reads and counts a.Writes as one atomic,
	// serialised step, and returns one reading per read, in order.
	AdmitState(ctx context.Context, a *StateAdmission) ([]StateReading, error)
	// SettleState moves an admitted event's counts (its writes) from one
	// outcome to another.
	SettleState(ctx context.Context, s *StateSettlement) error
	// PruneState deletes at most limit buckets that expired before t and
	// returns how many it deleted.
	PruneState(ctx context.Context, t time.Time, limit int) (int, error)
}

// StateAdmission is one event's state reads and writes.
type StateAdmission struct {
	Reads []StateRead
	// At is the event's time and Outcome the outcome it is counted under.
	At      time.Time
	Outcome string
	Writes  []StateWrite
}

// StateSettlement moves the event of Writes, admitted At, from outcome
// From to To.
type StateSettlement struct {
	Writes   []StateWrite
	At       time.Time
	From, To string
}

// StateRead reads the buckets of one scope key from a bucket on.
type StateRead struct {
	Key  string
	From time.Time
	// Outcomes are the outcomes counted; nil counts all.
	Outcomes []string
}

// StateWrite counts an event in one bucket of a scope key.
type StateWrite struct {
	Key     string
	Bucket  time.Time
	Value   float64
	Item    string
	Expires time.Time
}

// StateReading is what a StateRead found.
type StateReading struct {
	Count    int64
	Sum      float64
	Distinct int64
	// Last is the newest counted event's time; zero when there is none.
	Last time.Time
}

var (
	_ StateStore = (*SQLite)(nil)
	_ StateStore = (*Postgres)(nil)
)

// sqliteStateRead reads one state: ?3 lists the outcomes counted as
// ",a,b,", or is "" for all.
const sqliteStateRead = `SELECT coalesce(sum(n), 0), coalesce(sum(total), 0), count(DISTINCT item), max(last_ms)
	FROM rule_state_buckets WHERE state_key = ?1 AND bucket_ms >= ?2 AND n > 0
	AND (?3 = '' OR instr(?3, ',' || outcome || ',') > 0)`

const sqliteStateAdd = `INSERT INTO rule_state_buckets (state_key, bucket_ms, outcome, item, n, total, last_ms, expires_ms)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (state_key, bucket_ms, outcome, item) DO UPDATE
	SET n = n + excluded.n, total = total + excluded.total,
		last_ms = max(last_ms, excluded.last_ms), expires_ms = max(expires_ms, excluded.expires_ms)`

// addState adds n events (-1: takes one back) under outcome to
// each of ws.
func (s *SQLite) addState(ctx context.Context, tx *sql.Tx, ws []StateWrite, outcome string, at time.Time, n int64) error {
	add := tx.StmtContext(ctx, s.q.stateAdd)
	for _, w := range ws {
		if _, err := add.ExecContext(ctx, w.Key, w.Bucket.UnixMilli(), outcome, w.Item, n,
			float64(n)*w.Value, at.UnixMilli(), w.Expires.UnixMilli()); err != nil {
			return fmt.Errorf("counting rule state: %w", err)
		}
	}
	return nil
}

// AdmitState runs the admission on the writer: SQLite's one writer runs
// every write of the process in turn, so admissions are serialised.
func (s *SQLite) AdmitState(ctx context.Context, a *StateAdmission) ([]StateReading, error) {
	var out []StateReading
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = make([]StateReading, len(a.Reads)) // f runs again after a lost transaction
		read := tx.StmtContext(ctx, s.q.stateRead)
		for i, r := range a.Reads {
			outcomes := ""
			if len(r.Outcomes) > 0 {
				outcomes = "," + strings.Join(r.Outcomes, ",") + ","
			}
			var last sql.NullInt64
			if err := read.QueryRowContext(ctx, r.Key, r.From.UnixMilli(), outcomes).Scan(&out[i].Count, &out[i].Sum, &out[i].Distinct, &last); err != nil {
				return fmt.Errorf("reading rule state: %w", err)
			}
			if last.Valid {
				out[i].Last = time.UnixMilli(last.Int64)
			}
		}
		return s.addState(ctx, tx, a.Writes, a.Outcome, a.At, 1)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SettleState implements StateStore.
func (s *SQLite) SettleState(ctx context.Context, st *StateSettlement) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.addState(ctx, tx, st.Writes, st.From, st.At, -1); err != nil {
			return err
		}
		return s.addState(ctx, tx, st.Writes, st.To, st.At, 1)
	})
}

const statePrune = `DELETE FROM rule_state_buckets WHERE (state_key, bucket_ms, outcome, item) IN
	(SELECT state_key, bucket_ms, outcome, item FROM rule_state_buckets WHERE expires_ms < $1 ORDER BY expires_ms LIMIT $2)`

// PruneState implements StateStore.
func (s *SQLite) PruneState(ctx context.Context, t time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, strings.NewReplacer("$1", "?", "$2", "?").Replace(statePrune), t.UnixMilli(), limit)
		if err != nil {
			return fmt.Errorf("pruning rule state: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// pgStateWrites are ws as turngate_state_add's parallel arrays.
func pgStateWrites(ws []StateWrite) (keys []string, buckets []int64, items []string, values []float64, expires []int64) {
	for _, w := range ws {
		keys, buckets, items = append(keys, w.Key), append(buckets, w.Bucket.UnixMilli()), append(items, w.Item)
		values, expires = append(values, w.Value), append(expires, w.Expires.UnixMilli())
	}
	return
}

// AdmitState is one call of turngate_state_admit (migration 0012): one
// round trip, whatever the number of reads and writes.
func (s *Postgres) AdmitState(ctx context.Context, a *StateAdmission) ([]StateReading, error) {
	keys := make([]string, 0, len(a.Reads)+len(a.Writes))
	readKeys, froms, outcomes := make([]string, len(a.Reads)), make([]int64, len(a.Reads)), make([]string, len(a.Reads))
	for i, r := range a.Reads {
		keys = append(keys, r.Key)
		readKeys[i], froms[i], outcomes[i] = r.Key, r.From.UnixMilli(), strings.Join(r.Outcomes, ",")
	}
	wk, wb, wi, wv, we := pgStateWrites(a.Writes)
	keys = append(keys, wk...)
	rows, err := s.pool.Query(ctx, `SELECT n, total, items, last_ms FROM turngate_state_admit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		stateLocks(keys), readKeys, froms, outcomes, a.At.UnixMilli(), a.Outcome, wk, wb, wi, wv, we)
	if err != nil {
		return nil, fmt.Errorf("admitting rule state: %w", pgError(err))
	}
	defer rows.Close()
	out := make([]StateReading, 0, len(a.Reads))
	for rows.Next() {
		var r StateReading
		var last *int64
		if err := rows.Scan(&r.Count, &r.Sum, &r.Distinct, &last); err != nil {
			return nil, fmt.Errorf("admitting rule state: %w", err)
		}
		if last != nil {
			r.Last = time.UnixMilli(*last)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("admitting rule state: %w", pgError(err))
	}
	if len(out) != len(a.Reads) {
		return nil, fmt.Errorf("admitting rule state: %d readings for %d reads", len(out), len(a.Reads))
	}
	return out, nil
}

// stateLocks are the advisory lock ids of the scope keys: a 64-bit FNV-1a
// hash of each, sorted and without repeats, so that two admissions take
// their common locks in the same order. Two keys hashing alike only share
// a lock.
func stateLocks(keys []string) []int64 {
	locks := make([]int64, len(keys))
	for i, k := range keys {
		h := fnv.New64a()
		h.Write([]byte(k))
		locks[i] = int64(h.Sum64())
	}
	slices.Sort(locks)
	return slices.Compact(locks)
}

// SettleState is one call of turngate_state_settle.
func (s *Postgres) SettleState(ctx context.Context, st *StateSettlement) error {
	wk, wb, wi, wv, we := pgStateWrites(st.Writes)
	if _, err := s.pool.Exec(ctx, `SELECT turngate_state_settle($1, $2, $3, $4, $5, $6, $7, $8)`,
		wk, wb, wi, wv, we, st.From, st.To, st.At.UnixMilli()); err != nil {
		return fmt.Errorf("settling rule state: %w", pgError(err))
	}
	return nil
}

// PruneState implements StateStore.
func (s *Postgres) PruneState(ctx context.Context, t time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, statePrune, t.UnixMilli(), limit)
	if err != nil {
		return 0, fmt.Errorf("pruning rule state: %w", pgError(err))
	}
	return int(tag.RowsAffected()), nil
}
