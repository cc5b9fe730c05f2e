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

// StateStore keeps the events that declared rule state counts (migration
// 0011; policy/state declares the states, gateway/rulestate computes their
// values). Both drivers implement it: SQLite serialises every admission
// through its one writer, PostgreSQL per scope key with advisory locks, so
// on either a state read by one admission counts every admission of the
// same key before it, on every replica.
type StateStore interface {
	// AdmitState reads a.Reads and records a.Writes as one atomic,
	// serialised step, and returns one reading per read, in order.
	AdmitState(ctx context.Context, a *StateAdmission) ([]StateReading, error)
	// SettleState changes the outcome of the rows of event whose outcome
	// is from ("" for any) to to.
	SettleState(ctx context.Context, event, from, to string) error
	// PruneState deletes at most limit rows that expired before t and
	// returns how many it deleted.
	PruneState(ctx context.Context, t time.Time, limit int) (int, error)
}

// StateAdmission is one event's state reads and writes.
type StateAdmission struct {
	Reads []StateRead
	// Event names the event's rows for SettleState; At is its time and
	// Outcome the outcome its rows start with.
	Event   string
	At      time.Time
	Outcome string
	Writes  []StateWrite
}

// StateRead reads the rows of one scope key from a time on.
type StateRead struct {
	Key  string
	From time.Time
	// Outcomes are the outcomes counted; nil counts all.
	Outcomes []string
}

// StateWrite is one row of an event.
type StateWrite struct {
	Key     string
	Value   float64
	Item    string
	Expires time.Time
}

// StateReading is what a StateRead found.
type StateReading struct {
	Count    int64
	Sum      float64
	Distinct int64
	// Last is the newest row's time; zero when there is none.
	Last time.Time
}

var (
	_ StateStore = (*SQLite)(nil)
	_ StateStore = (*Postgres)(nil)
)

const sqliteStateRead = `SELECT count(*), coalesce(sum(value), 0), count(DISTINCT item), max(at_ms)
	FROM rule_state_events WHERE state_key = ? AND at_ms >= ?`

// AdmitState runs the admission on the writer: SQLite's one writer runs
// every write of the process in turn, so admissions are serialised.
func (s *SQLite) AdmitState(ctx context.Context, a *StateAdmission) ([]StateReading, error) {
	var out []StateReading
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = make([]StateReading, len(a.Reads)) // f runs again after a lost transaction
		for i, r := range a.Reads {
			q, args := sqliteStateRead, []any{r.Key, r.From.UnixMilli()}
			if len(r.Outcomes) > 0 {
				q += " AND outcome IN (?" + strings.Repeat(",?", len(r.Outcomes)-1) + ")"
				for _, o := range r.Outcomes {
					args = append(args, o)
				}
			}
			var last sql.NullInt64
			if err := tx.QueryRowContext(ctx, q, args...).Scan(&out[i].Count, &out[i].Sum, &out[i].Distinct, &last); err != nil {
				return fmt.Errorf("reading rule state: %w", err)
			}
			if last.Valid {
				out[i].Last = time.UnixMilli(last.Int64)
			}
		}
		for _, w := range a.Writes {
			if _, err := tx.ExecContext(ctx, `INSERT INTO rule_state_events (state_key, at_ms, event, outcome, value, item, expires_ms)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, w.Key, a.At.UnixMilli(), a.Event, a.Outcome, w.Value, w.Item, w.Expires.UnixMilli()); err != nil {
				return fmt.Errorf("recording rule state: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SettleState implements StateStore.
func (s *SQLite) SettleState(ctx context.Context, event, from, to string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE rule_state_events SET outcome = ? WHERE event = ? AND (? = '' OR outcome = ?)`, to, event, from, from)
		if err != nil {
			return fmt.Errorf("settling rule state: %w", err)
		}
		return nil
	})
}

const statePrune = `DELETE FROM rule_state_events WHERE id IN
	(SELECT id FROM rule_state_events WHERE expires_ms < $1 ORDER BY expires_ms LIMIT $2)`

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

// AdmitState is one call of turngate_state_admit (migration 0011): one
// round trip, whatever the number of reads and writes.
func (s *Postgres) AdmitState(ctx context.Context, a *StateAdmission) ([]StateReading, error) {
	keys := make([]string, 0, len(a.Reads)+len(a.Writes))
	readKeys, froms, outcomes := make([]string, len(a.Reads)), make([]int64, len(a.Reads)), make([]string, len(a.Reads))
	for i, r := range a.Reads {
		keys = append(keys, r.Key)
		readKeys[i], froms[i], outcomes[i] = r.Key, r.From.UnixMilli(), strings.Join(r.Outcomes, ",")
	}
	writeKeys, values, items, expires := make([]string, len(a.Writes)), make([]float64, len(a.Writes)), make([]string, len(a.Writes)), make([]int64, len(a.Writes))
	for i, w := range a.Writes {
		keys = append(keys, w.Key)
		writeKeys[i], values[i], items[i], expires[i] = w.Key, w.Value, w.Item, w.Expires.UnixMilli()
	}
	rows, err := s.pool.Query(ctx, `SELECT n, total, items, last_ms FROM turngate_state_admit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		stateLocks(keys), readKeys, froms, outcomes, a.Event, a.At.UnixMilli(), a.Outcome, writeKeys, values, items, expires)
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

// SettleState implements StateStore.
func (s *Postgres) SettleState(ctx context.Context, event, from, to string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE rule_state_events SET outcome = $3 WHERE event = $1 AND ($2 = '' OR outcome = $2)`, event, from, to); err != nil {
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
