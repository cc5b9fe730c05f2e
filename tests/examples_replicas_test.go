package tests

import (
	"net/http"
	"strings"
	"testing"
)

// examplePGSchema gives the postgres-replicas example a fresh schema of the
// tests' PostgreSQL database.
func examplePGSchema(t *testing.T) []string {
	dsn, _, _ := pgSchema(t)
	return []string{"TURNGATE_EXAMPLE_PG_DSN=" + dsn}
}

// examplePostgresReplicas: a second replica on the same database resumes
// the first one's in-flight stream from its first chunk, and both serve
// the same history afterwards.
func examplePostgresReplicas(t *testing.T, x *exampleRun) {
	b := startGateway(t, gatewayOptions{Config: "turngate.yaml", Dir: x.dir, Env: x.opts.Env})
	const session = "story-1"
	post := x.openChat("assistant", userChat(session, "u1", "tell me a story about Oslo", nil))
	if _, err := post.until("tool-output-available"); err != nil {
		t.Fatal(err)
	}
	if _, err := post.until("text-delta"); err != nil {
		t.Fatal(err)
	}
	resp := b.do(http.MethodGet, "/v1/agents/assistant/chat/"+session+"/stream", nil)
	checkStreamResponse(t, resp)
	got, err := readUIStream(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("the resumed stream violates the protocol: %v\n%s", err, got)
	}
	orig, err := post.finish()
	if err != nil {
		t.Fatalf("the original stream violates the protocol: %v\n%s", err, orig)
	}
	if !sameChunks(orig.Chunks, got.Chunks) {
		t.Errorf("the stream resumed on the other replica differs from the original:\nA:\n%s\nB:\n%s", orig, got)
	}
	if !strings.Contains(got.text(), "two gateways shared one database") {
		t.Errorf("the resumed stream does not tell the story: %q", got.text())
	}
	a, bh := x.history("assistant", session), b.history("assistant", session)
	if mustJSON(t, a) != mustJSON(t, bh) || len(a) != 2 {
		t.Errorf("the replicas serve different histories:\nA %s\nB %s", mustJSON(t, a), mustJSON(t, bh))
	}
}
