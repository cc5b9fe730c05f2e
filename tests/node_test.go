package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turngate/turngate/internal/npmci"
)

// nodeTimeout bounds npm ci and the Node suite each.
const nodeTimeout = 10 * time.Minute

// TestNodeClients runs the Node.js suite in tests/node (the ai package's
// transport and Chat class, the official openai client and @anthropic-ai/sdk)
// against the built gateway serving testdata/node. Without node or npm it
// skips, but fails in CI (TURNGATE_CI, which .ci/run sets), where the
// suite must run.
func TestNodeClients(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("TURNGATE_CI") != "" {
				t.Fatalf("the Node.js client suite needs %s (TURNGATE_CI is set: .ci/run installs nodejs and npm): %v", tool, err)
			}
			t.Skipf("skipping the Node.js client suite: %s is not in PATH", tool)
		}
	}
	suite, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	npmCI(t, suite)

	up := startFakeOpenAI(t)
	g := startGateway(t, gatewayOptions{Config: "turngate.yaml", Dir: fixture(t, "node"),
		Env: []string{"TURNGATE_TEST_UPSTREAM_URL=" + up + "/v1"}})

	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test")
	cmd.Dir = suite
	cmd.Env = append(os.Environ(), "TURNGATE_URL="+g.URL, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test failed: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("node --test:\n%s", out)
	}
}

// npmCI installs the suite's locked dependencies unless node_modules was
// installed from the same package-lock.json already.
func npmCI(t *testing.T, suite string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), nodeTimeout)
	defer cancel()
	if err := npmci.Install(ctx, suite); err != nil {
		t.Fatal(err)
	}
}

// startFakeOpenAI serves a Chat Completions upstream for the suite's
// upstream agent until the test ends. The last user message says what it
// does; attempts are counted per message text, so a client's retry is seen:
//
//   - "rate limited once …": 429 with retry-after-ms on the first attempt;
//   - "overloaded once …": 503 on the first attempt;
//   - "bad request …": 400 on every attempt;
//   - "fail mid-stream …": two text deltas, then an error object in the
//     stream;
//   - anything else (and every later attempt): "Recovered on attempt N.".
func startFakeOpenAI(t *testing.T) string {
	t.Helper()
	var mu sync.Mutex
	attempts := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad body","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		var last string
		for _, m := range req.Messages {
			if m.Role == "user" {
				last = contentText(m.Content)
			}
		}
		mu.Lock()
		attempts[last]++
		n := attempts[last]
		mu.Unlock()
		fail := func(status int, typ, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":%q,"type":%q}}`, msg, typ)
		}
		switch {
		case strings.HasPrefix(last, "rate limited once") && n == 1:
			w.Header().Set("retry-after-ms", "50")
			fail(http.StatusTooManyRequests, "requests", "Rate limit reached for fake-model")
			return
		case strings.HasPrefix(last, "overloaded once") && n == 1:
			fail(http.StatusServiceUnavailable, "server_error", "The server is overloaded")
			return
		case strings.HasPrefix(last, "bad request"):
			fail(http.StatusBadRequest, "invalid_request_error", "Unsupported parameter")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			fin := "null"
			if finish != "" {
				fin = `"` + finish + `"`
			}
			fmt.Fprintf(w, "data: {\"id\":\"fake\",\"object\":\"chat.completion.chunk\",\"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":%s}]}\n\n", delta, fin)
		}
		if strings.HasPrefix(last, "fail mid-stream") {
			chunk("Partial ", "")
			chunk("answer", "")
			fmt.Fprint(w, "data: {\"error\":{\"message\":\"the model crashed\",\"type\":\"invalid_request_error\"}}\n\n")
			return
		}
		chunk(fmt.Sprintf("Recovered on attempt %d.", n), "")
		chunk("", "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// contentText is a Chat Completions message content as text: a string, or
// the text parts of an array.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
