package main

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// TestPeerServesATurn starts the AI SDK peer (npm ci of its lock file, then
// node server.js) and runs one generated turn against it with the load
// program's client: text, the search call with its limit clamped by the
// peer's beforeToolCall wrapper, text and [DONE], so the comparison's other
// side does not rot.
func TestPeerServesATurn(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping the AI SDK peer: %s is not in PATH", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmTimeout+readyTimeout)
	defer cancel()
	p := &params{Conc: 1}
	peer, err := startPeer(ctx, p, modelShape{known: true, script: newScript(4), delay: time.Millisecond}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.close()
	l := &turnLoad{gw: peer, agent: benchAgent, prompt: promptHi, conc: 1, perSession: 2}
	for n := range 2 { // the second turn reads the session's history
		s, kind, err := l.turn(ctx, "peer-test", "m-"+string(rune('0'+n)))
		if err != nil {
			t.Fatalf("turn %d: %s: %v", n, kind, err)
		}
		// start, 2 steps of start-step, text-start, 4 deltas, text-end and
		// finish-step, the call's 5 events, finish.
		if want := 2 + 2*(1+1+4+1+1) + 5; s.events != want {
			t.Errorf("turn %d: %d events, want %d", n, s.events, want)
		}
	}
}
