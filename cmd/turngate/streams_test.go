package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/turngate/turngate/gateway/audit"
)

// TestServeLogsAndAuditNeverMix checks issue 14's "logs go to stderr, audit
// records to their sink only, never interleaved": with the stdout sink,
// while turns run concurrently with rule reloads (which log), every
// stdout line is one whole audit record and no stderr line is one; with the
// file sink, stdout stays empty and the records are in the file.
func TestServeLogsAndAuditNeverMix(t *testing.T) {
	for _, sink := range []string{"stdout", "file"} {
		t.Run(sink, func(t *testing.T) {
			path := writeServeConfig(t, "")
			dir := filepath.Dir(path)
			file := filepath.Join(dir, "audit.jsonl")
			cfg, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			sinkCfg := "audit: {sink: stdout}"
			if sink == "file" {
				sinkCfg = "audit: {sink: file, path: " + file + "}"
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(cfg), "audit: {sink: none}", sinkCfg, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			r := startServe(t, path)
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body := `{"id":"s` + string(rune('a'+i)) + `","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"weather in Paris"}]}]}`
					resp, err := http.Post("http://"+r.addr+"/v1/agents/demo/chat", "application/json", strings.NewReader(body))
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}()
				r.hup <- syscall.SIGHUP
			}
			wg.Wait()
			metricsHave(t, r.addr, `turngate_rule_reloads_total{result="unchanged"} 4`)
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}

			stdout, stderr := r.stdout.String(), r.stderr.String()
			records := stdout
			if sink == "file" {
				if stdout != "" {
					t.Errorf("file sink, yet stdout has %q", stdout)
				}
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				records = string(data)
			}
			kinds := map[string]int{}
			for line := range strings.Lines(records) {
				var rec struct {
					Kind string `json:"kind"`
				}
				if !strings.HasSuffix(line, "\n") || json.Unmarshal([]byte(line), &rec) != nil || rec.Kind == "" {
					t.Fatalf("audit output has a line that is not one whole record: %q", line)
				}
				kinds[rec.Kind]++
			}
			for _, k := range []string{audit.KindDecision, audit.KindTurn, audit.KindAfterToolCall, audit.KindOnStepFinish, audit.KindOnChatResponse} {
				if kinds[k] == 0 {
					t.Errorf("no %s record among %v", k, kinds)
				}
			}
			logs := 0
			sc := bufio.NewScanner(strings.NewReader(stderr))
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "time=") || strings.Contains(line, `"kind":`) {
					t.Errorf("stderr has a line that is not a log line: %q", line)
				}
				logs++
			}
			if logs == 0 || !strings.Contains(stderr, "rules") {
				t.Errorf("stderr has no logs of the reloads: %q", stderr)
			}
		})
	}
}
