package gateway

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // tablesHolding reads the SQLite file

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/erasure"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/gateway/store/storefault"
)

// fileChat is a chat message of session with text and a file; the text
// holds secret(session).
func fileChat(session string) map[string]any {
	b := chatBody(session, "u-"+session, "remember my card "+secret(session))
	b["messages"].([]any)[0].(map[string]any)["parts"] = []any{
		map[string]any{"type": "text", "text": "remember my card " + secret(session)},
		map[string]any{"type": "file", "mediaType": "image/png", "filename": "card.png", "url": pngURL},
	}
	return b
}

// secret is the card number only session's messages hold.
func secret(session string) string { return "4111-" + session + "-0042" }

// TestEraseSession erases a session over HTTP on both drivers, with the
// audit log recording the rules' inputs: its export first holds the
// messages with the file and the decision records; the erasure answers a
// tombstone whose counts and hashes match that export; then the session
// is 404 on every route, the decision store has no record of it, no table
// of the store holds its messages' text, the audit log holds the
// tombstone and still verifies. Another tenant gets 404 for the session on
// every route before and after, and erases nothing.
func TestEraseSession(t *testing.T) {
	forEachDriver(t, func(t *testing.T, mod func(*config.Config)) {
		g := newTestGateway(t, "basic", mod, withApprovalKeys, func(c *config.Config) {
			c.Audit.Sink = config.SinkStdout // the decision records carry the rules' input
		})
		alice, ada, mallory := bearer(userKey), bearer(adminKey), bearer(otherKey)
		readUIStream(t, g.do("POST", "/v1/agents/demo/chat", fileChat("s1"), alice...))
		readUIStream(t, g.do("POST", "/v1/agents/demo/chat", fileChat("keep"), alice...))
		// A session has no owner: only the tenant's admin lists, exports
		// and erases, not alice who wrote it (nor any other roleless key).
		for _, r := range []struct{ method, path string }{
			{"GET", "/v1/agents/demo/sessions"},
			{"GET", "/v1/agents/demo/sessions/s1/export"},
			{"DELETE", "/v1/agents/demo/sessions/s1"},
		} {
			var e struct{ Code, Message string }
			g.doJSON(r.method, r.path, nil, http.StatusForbidden, &e, alice...)
			if e.Code != CodeForbidden || !strings.Contains(e.Message, `"admin" role`) {
				t.Errorf("%s %s as alice: %+v, want forbidden naming the admin role", r.method, r.path, e)
			}
		}

		var doc erasure.Document
		g.doJSON("GET", "/v1/agents/demo/sessions/s1/export", nil, http.StatusOK, &doc, ada...)
		if len(doc.Messages) != 2 || !bytes.Contains(doc.Messages[0], []byte(pngURL)) || len(doc.Turns) != 1 ||
			len(doc.Decisions) == 0 || !bytes.Contains(doc.Decisions[0], []byte(secret("s1"))) {
			t.Fatalf("export = %+v", doc)
		}
		for _, r := range []struct{ method, path string }{
			{"GET", "/v1/agents/demo/sessions/s1/export"},
			{"DELETE", "/v1/agents/demo/sessions/s1"},
			{"GET", "/v1/agents/demo/sessions/s1/messages"},
		} {
			g.doJSON(r.method, r.path, nil, http.StatusNotFound, nil, mallory...)
		}
		var list struct{ Sessions []struct{ ID string } }
		g.doJSON("GET", "/v1/agents/demo/sessions", nil, http.StatusOK, &list, mallory...)
		if len(list.Sessions) != 0 {
			t.Errorf("globex lists acme's sessions: %+v", list)
		}

		var tomb audit.Erasure
		g.doJSON("DELETE", "/v1/agents/demo/sessions/s1", nil, http.StatusOK, &tomb, ada...)
		want := erasure.Erased(&doc)
		if tomb.By != "ada" || tomb.Tenant != "acme" || tomb.SessionID != "s1" || tomb.Reason != audit.ErasureRequested {
			t.Errorf("tombstone = %+v", tomb)
		}
		got, _ := json.Marshal(tomb.Erased)
		if w, _ := json.Marshal(want); string(got) != string(w) {
			t.Errorf("tombstone erased\n%s\nthe export hashes to\n%s", got, w)
		}
		if tomb.Erased[0].Count != 2 || tomb.Erased[1].Kind != erasure.KindFiles || tomb.Erased[1].Count != 1 {
			t.Errorf("tombstone counts %s, want 2 messages and 1 file", got)
		}
		for _, r := range []struct{ method, path string }{
			{"GET", "/v1/agents/demo/sessions/s1/export"},
			{"DELETE", "/v1/agents/demo/sessions/s1"},
		} {
			g.doJSON(r.method, r.path, nil, http.StatusNotFound, nil, ada...)
		}
		g.doJSON("GET", "/v1/agents/demo/sessions/s1/messages", nil, http.StatusNotFound, nil, alice...)
		if _, err := g.store.ExportSession(context.Background(), "acme", "s1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the store still has the session: %v", err)
		}
		g.doJSON("GET", "/v1/agents/demo/sessions", nil, http.StatusOK, &list, ada...)
		if len(list.Sessions) != 1 || list.Sessions[0].ID != "keep" {
			t.Errorf("acme's sessions after the erasure = %+v, want keep", list)
		}
		var decs struct{ Decisions []json.RawMessage }
		for session, want := range map[string]bool{"s1": false, "keep": true} {
			g.doJSON("GET", "/v1/admin/decisions?session="+session, nil, http.StatusOK, &decs, bearer(adminKey)...)
			if (len(decs.Decisions) > 0) != want {
				t.Errorf("the decision store holds %d records of %s after the erasure of s1", len(decs.Decisions), session)
			}
		}
		g.close()
		checkTombstone(t, g.audit.Bytes(), "s1")
		if tables := tablesHolding(t, g.cfg, secret("s1")); len(tables) > 0 {
			t.Errorf("after the erasure, the store's tables %v still hold the erased session's text", tables)
		}
		if tables := tablesHolding(t, g.cfg, secret("keep")); len(tables) == 0 {
			t.Error("the other session's text is in no table: tablesHolding finds nothing")
		}
	})
}

// checkTombstone verifies the audit log's chain and finds the erasure
// record of session in it.
func checkTombstone(t *testing.T, log []byte, session string) {
	t.Helper()
	if err := (&audit.Verifier{}).Verify(bytes.NewReader(log), "audit"); err != nil {
		t.Fatalf("the audit log does not verify after the erasure: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			Kind      string `json:"kind"`
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Kind == audit.KindErasure && rec.SessionID == session {
			return
		}
	}
	t.Errorf("no erasure record of %s in the audit log:\n%s", session, log)
}

// TestEraseSessionRefusedWhileTurnRuns: a running turn makes the erasure a
// 409 turn_running, on its replica and on another one; after it ends the
// erasure goes through.
func TestEraseSessionRefusedWhileTurnRuns(t *testing.T) {
	gate := newStepGate(true)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
	respA := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hello there"))
	<-gate.entered
	for _, g := range []*testGateway{a, b} {
		resp := g.do("DELETE", "/v1/agents/demo/sessions/s1", nil)
		var body map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusConflict || body["code"] != CodeTurnRunning {
			t.Errorf("erasing a running session: %d %v, want 409 %s", resp.StatusCode, body, CodeTurnRunning)
		}
	}
	close(gate.open)
	goRead(respA())()
	waitReleased(t, a, "s1")
	b.doJSON("DELETE", "/v1/agents/demo/sessions/s1", nil, http.StatusOK, nil)
	// a, which ran the turn and cached its transcript, finds it gone.
	a.doJSON("GET", "/v1/agents/demo/sessions/s1/messages", nil, http.StatusNotFound, nil)
}

// TestEraseSessionStoreOutage: the store fails the erasure: 503
// store_unavailable, and the session is whole afterwards.
func TestEraseSessionStoreOutage(t *testing.T) {
	cfg := testConfig(t, "empty")
	st, faults := storefault.Wrap(openTestStore(t, cfg))
	g := startGateway(t, cfg, Options{Store: st})
	readUIStream(t, g.do("POST", "/v1/agents/demo/chat", fileChat("s1")))
	faults.Fail("EraseSession", 1, 1, func(op string) error { return &store.UnavailableError{Op: op, Err: errors.New("connection refused")} })
	resp := g.do("DELETE", "/v1/agents/demo/sessions/s1", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("erasure during an outage: %d, want 503", resp.StatusCode)
	}
	if msgs := g.history("demo", "s1"); len(msgs) != 2 {
		t.Errorf("after the failed erasure the session holds %d messages, want 2", len(msgs))
	}
	if strings.Contains(string(g.audit.Bytes()), `"kind":"erasure"`) {
		t.Error("a failed erasure wrote a tombstone")
	}
}

// tablesHolding names the tables of cfg's store whose rows hold secret in
// any column (every column read as text), on either driver.
func tablesHolding(t *testing.T, cfg *config.Config, secret string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	if cfg.Store.Driver == config.StorePostgres {
		conn, err := pgx.Connect(ctx, cfg.Store.DSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables
			WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			var n int
			q := fmt.Sprintf(`SELECT COUNT(*) FROM %s t WHERE t::text LIKE '%%' || $1 || '%%'`, pgx.Identifier{tb}.Sanitize())
			if err := conn.QueryRow(ctx, q, secret).Scan(&n); err != nil {
				t.Fatalf("%s: %v", tb, err)
			}
			if n > 0 {
				out = append(out, tb)
			}
		}
		return out
	}
	db, err := sql.Open("sqlite", cfg.Store.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		var conds []string
		cols, err := db.Query(`SELECT name FROM pragma_table_info(?)`, tb)
		if err != nil {
			t.Fatal(err)
		}
		for cols.Next() {
			var c string
			if err := cols.Scan(&c); err != nil {
				t.Fatal(err)
			}
			conds = append(conds, fmt.Sprintf(`instr(CAST(%q AS TEXT), ?1) > 0`, c))
		}
		if err := cols.Close(); err != nil {
			t.Fatal(err)
		}
		if len(conds) == 0 {
			continue
		}
		var n int
		if err := db.QueryRow(fmt.Sprintf(`SELECT COUNT(*) FROM %q WHERE %s`, tb, strings.Join(conds, " OR ")), secret).Scan(&n); err != nil {
			t.Fatalf("%s: %v", tb, err)
		}
		if n > 0 {
			out = append(out, tb)
		}
	}
	return out
}
