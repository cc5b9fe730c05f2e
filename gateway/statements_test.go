package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/turngate/turngate/gateway/store"
)

// statementLog is a pgx tracer that records the statements a PostgreSQL
// store sends, each with its connection, so a test counts round trips and
// transactions, and the decision records the decision store's batches
// carry.
type statementLog struct {
	mu    sync.Mutex
	stmts []tracedStatement
	// decisionRows counts the rows of the decision batches recorded;
	// grew is signalled when it grows.
	decisionRows int
	grew         chan struct{}
}

type tracedStatement struct {
	conn *pgx.Conn
	sql  string
}

// decisionBatch reports whether sql is a batch of the decision store.
func decisionBatch(sql string) bool { return strings.Contains(sql, "INSERT INTO decisions ") }

func (l *statementLog) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	sql := strings.Join(strings.Fields(d.SQL), " ")
	l.mu.Lock()
	l.stmts = append(l.stmts, tracedStatement{conn, sql})
	if decisionBatch(sql) && len(d.Args) > 0 {
		at, _ := d.Args[0].([]int64) // the batch's columns come as arrays
		l.decisionRows += len(at)
		select {
		case l.grew <- struct{}{}:
		default:
		}
	}
	l.mu.Unlock()
	return ctx
}

// awaitDecisions returns once n more decision rows were sent than were
// when it was called with n before: waiting for a turn's records, which
// the decision writer stores once the turn ends, after its lease is
// released.
func (l *statementLog) awaitDecisions(seen *int, n int) {
	*seen += n
	for {
		l.mu.Lock()
		got := l.decisionRows
		l.mu.Unlock()
		if got >= *seen {
			return
		}
		<-l.grew
	}
}

func (*statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// background is the start of the statements a replica sends on its own
// schedule, whatever its turns: the approvals' expiry sweep (once a second
// at most). The submission workers' poll is another: the test runs none.
var background = []string{"SELECT 1 FROM approvals WHERE state = 'pending'"}

// take returns the statements recorded since the last take, but the
// background ones.
func (l *statementLog) take() []tracedStatement {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []tracedStatement
	for _, s := range l.stmts {
		if !slices.ContainsFunc(background, func(p string) bool { return strings.HasPrefix(s.sql, p) }) {
			out = append(out, s)
		}
	}
	l.stmts = nil
	return out
}

// transactions counts the transactions of stmts: a BEGIN and what its
// connection sends up to its COMMIT or ROLLBACK is one, any other statement
// is one of its own.
func transactions(stmts []tracedStatement) int {
	n := 0
	open := map[*pgx.Conn]bool{}
	for _, s := range stmts {
		switch verb := strings.ToLower(strings.Fields(s.sql + " x")[0]); {
		case verb == "begin":
			open[s.conn] = true
			n++
		case verb == "commit" || verb == "rollback":
			open[s.conn] = false
		case !open[s.conn]:
			n++
		}
	}
	return n
}

// TestTurnStatements counts what a chat turn sends PostgreSQL, on a
// session whose transcript this replica has cached, with nobody following
// its stream from another replica: three statements, each its own
// transaction and one round trip: the lease's acquisition (which also
// reads the session's version for the cache), the admission, the finish
// (which records the turn and releases the lease). The count does not grow with the number of
// chunks the turn streams or with how long it streams: no statement per
// chunk, nor per relay interval. The decision store's batches are counted
// apart: the turn's hook records are one batch, the decision writer
// lingering until the turn's onChatResponse record (the linger is an
// hour here, so only the turn's end can end it).
func TestTurnStatements(t *testing.T) {
	// A turn without tool calls records beforeTurn, beforeStep,
	// onStepFinish and onChatResponse.
	const hookRecords = 4
	log := statementLog{grew: make(chan struct{}, 1)}
	cfg := testConfig(t, "empty")
	onPostgres(t)(cfg)
	cfg.Limits.SubmissionWorkers = 0 // their backstop poll is no turn's
	st, err := store.OpenPostgres(context.Background(), cfg.Store.DSN, store.WithTracer(&log))
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, cfg, Options{Store: st, DecisionLinger: time.Hour})
	seen := 0
	// A second store on the schema, untraced, watches the lease.
	watch := openTestStore(t, cfg).(*store.Postgres)
	t.Cleanup(func() { watch.Close() })
	released := func(session string) {
		t.Helper()
		for {
			_, live, err := watch.LiveStream(context.Background(), "default", session)
			if err != nil {
				t.Fatal(err)
			}
			if !live {
				return
			}
		}
	}
	for _, tt := range []struct {
		name, agent, text string
		minChunks         int
	}{
		{"short reply", "demo", "hello", 1},
		// 20 ms a chunk: the turn streams for a quarter of a second.
		{"long paced reply", "slow", "tell me a long story", 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			session := "s-" + tt.agent
			path := "/v1/agents/" + tt.agent + "/chat"
			// The first turn creates the session and fills the cache.
			readUIStream(t, g.do("POST", path, chatBody(session, "u1", tt.text)))
			released(session)
			log.awaitDecisions(&seen, hookRecords)
			log.take()
			chunks := readUIStream(t, g.do("POST", path, chatBody(session, "u2", tt.text)))
			released(session)
			log.awaitDecisions(&seen, hookRecords)
			stmts := log.take()
			deltas := 0
			for _, c := range chunks {
				if c["type"] == "text-delta" {
					deltas++
				}
			}
			if deltas < tt.minChunks {
				t.Fatalf("the turn streamed %d text deltas, want at least %d", deltas, tt.minChunks)
			}
			// The decision store's batches are the decision writer's, off
			// the turn's path: counted apart.
			var turn []tracedStatement
			decisionBatches := 0
			var text strings.Builder
			for _, s := range stmts {
				fmt.Fprintf(&text, "\n  %s", s.sql)
				if decisionBatch(s.sql) {
					decisionBatches++
					continue
				}
				turn = append(turn, s)
			}
			if got := transactions(turn); got != 3 || len(turn) != 3 {
				t.Errorf("a turn of %d deltas: %d transactions, %d statements, want 3 of each:%s", deltas, got, len(turn), text.String())
			}
			if decisionBatches != 1 {
				t.Errorf("a turn of %d deltas: %d decision store batches, want its %d hook records in one:%s", deltas, decisionBatches, hookRecords, text.String())
			}
			t.Logf("a turn of %d deltas: %d transactions, %d statements, %d decision batches:%s", deltas, transactions(turn), len(turn), decisionBatches, text.String())
		})
	}
}
