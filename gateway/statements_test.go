package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/turngate/turngate/gateway/store"
)

// statementLog is a pgx tracer that records the statements a PostgreSQL
// store sends, each with its connection, so a test counts round trips and
// transactions.
type statementLog struct {
	mu    sync.Mutex
	stmts []tracedStatement
}

type tracedStatement struct {
	conn *pgx.Conn
	sql  string
}

func (l *statementLog) TraceQueryStart(ctx context.Context, conn *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	l.mu.Lock()
	l.stmts = append(l.stmts, tracedStatement{conn, strings.Join(strings.Fields(d.SQL), " ")})
	l.mu.Unlock()
	return ctx
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
// chunk, nor per relay interval.
func TestTurnStatements(t *testing.T) {
	// A turn without tool calls records beforeTurn, beforeStep,
	// onStepFinish and onChatResponse.
	const maxHookRecords = 4
	var log statementLog
	cfg := testConfig(t, "empty")
	onPostgres(t)(cfg)
	cfg.Limits.SubmissionWorkers = 0 // their backstop poll is no turn's
	st, err := store.OpenPostgres(context.Background(), cfg.Store.DSN, store.WithTracer(&log))
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, cfg, Options{Store: st})
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
			log.take()
			chunks := readUIStream(t, g.do("POST", path, chatBody(session, "u2", tt.text)))
			released(session)
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
			// the turn's path and shared by whatever turns run meanwhile:
			// counted apart, and never more than the turn has hook records.
			var turn []tracedStatement
			decisionBatches := 0
			var text strings.Builder
			for _, s := range stmts {
				fmt.Fprintf(&text, "\n  %s", s.sql)
				if strings.Contains(s.sql, "INSERT INTO decisions ") {
					decisionBatches++
					continue
				}
				turn = append(turn, s)
			}
			if got := transactions(turn); got != 3 || len(turn) != 3 {
				t.Errorf("a turn of %d deltas: %d transactions, %d statements, want 3 of each:%s", deltas, got, len(turn), text.String())
			}
			if decisionBatches > maxHookRecords {
				t.Errorf("a turn of %d deltas: %d decision store batches, want at most %d (one per hook record):%s", deltas, decisionBatches, maxHookRecords, text.String())
			}
			t.Logf("a turn of %d deltas: %d transactions, %d statements, %d decision batches:%s", deltas, transactions(turn), len(turn), decisionBatches, text.String())
		})
	}
}
