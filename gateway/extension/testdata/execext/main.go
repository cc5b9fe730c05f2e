// Command execext is the exec extension of the extension package's tests:
// it answers each stdin envelope with one stdout line. On beforeTurn it
// appends " (exec)" to the system prompt; it logs each hook it receives
// to the file named by -log, and exits after -crash-after envelopes
// (0: never).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
)

func main() {
	logPath := flag.String("log", "", "file to append each received hook to")
	crashAfter := flag.Int("crash-after", 0, "exit after this many envelopes")
	flag.Parse()
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		var env struct {
			ID       uint64 `json:"id"`
			Hook     string `json:"hook"`
			Snapshot struct {
				System string `json:"system"`
			} `json:"snapshot"`
		}
		if err := json.Unmarshal(sc.Bytes(), &env); err != nil {
			fmt.Fprintln(os.Stderr, "bad envelope:", err)
			continue
		}
		if *logPath != "" {
			f, err := os.OpenFile(*logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				fmt.Fprintln(f, env.Hook)
				f.Close()
			}
		}
		answer := map[string]any{"id": env.ID}
		if env.Hook == "beforeTurn" {
			answer["result"] = map[string]any{"system": env.Snapshot.System + " (exec)"}
		}
		out, _ := json.Marshal(answer)
		fmt.Println(string(out))
		if n++; *crashAfter > 0 && n >= *crashAfter {
			os.Exit(3)
		}
	}
}
