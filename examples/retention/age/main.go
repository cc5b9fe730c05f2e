// Command age makes a stored session look idle for longer than it has
// been, for examples/retention: it moves the session's last write back in
// the SQLite store, as if the time had passed. Run it while the gateway
// is stopped. It is a demonstration aid, not an operator's tool: in
// production the time passes on its own.
//
//	age -db data/turngate.db -tenant acme -session s1 -by 2h
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"log"

	_ "modernc.org/sqlite"
)

func main() {
	db := flag.String("db", "data/turngate.db", "the gateway's SQLite store")
	tenant := flag.String("tenant", "", "the session's tenant")
	session := flag.String("session", "", "the session id")
	by := flag.Duration("by", 0, "how far back to move its last write")
	flag.Parse()
	if *tenant == "" || *session == "" || *by <= 0 {
		log.Fatal("usage: age -db FILE -tenant TENANT -session ID -by DURATION")
	}
	conn, err := sql.Open("sqlite", *db)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	// updated_at is the session's last write, in Unix nanoseconds.
	res, err := conn.Exec(`UPDATE sessions SET updated_at = updated_at - ? WHERE tenant = ? AND id = ?`, by.Nanoseconds(), *tenant, *session)
	if err != nil {
		log.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		log.Fatalf("no session %s of tenant %s in %s", *session, *tenant, *db)
	}
	fmt.Printf("session %s of %s last written %s earlier\n", *session, *tenant, *by)
}
