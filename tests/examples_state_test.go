package tests

import (
	"fmt"
	"strings"
	"testing"
)

// exampleRateLimitPerPrincipal: alice's 4th email in the hour is blocked,
// bob's first runs, and the block's record holds the count it read.
func exampleRateLimitPerPrincipal(t *testing.T, x *exampleRun) {
	alice, bob := x.as("alice-demo-6c0b8a2e4f1d9357a1c2e3f405162738"), x.as("bob-demo-0f9e8d7c6b5a49382716a5b4c3d2e1f0")
	for i := 1; i <= 4; i++ {
		s := alice.chat("mailer", userChat(fmt.Sprintf("alice-%d", i), "u1", fmt.Sprintf("email carol%d@example.com", i), nil))
		call, ok := s.toolCall("send_email")
		blocked := ok && string(call.Output) == `"send_email may run at most 3 times an hour per caller"`
		if !ok || blocked != (i == 4) {
			t.Errorf("alice's email %d: blocked %v:\n%s", i, blocked, s)
		}
	}
	s := bob.chat("mailer", userChat("bob-1", "u1", "email erin@example.com", nil))
	if call, ok := s.toolCall("send_email"); !ok || !strings.Contains(string(call.Output), "erin@example.com") {
		t.Errorf("bob's first email did not run:\n%s", s)
	}
	d := toolDecisions(x.turnAudit("alice-4", 1))
	if len(d) != 1 || !strings.Contains(mustJSON(t, d[0]["input"]), `"state":{"emails_per_hour":3}`) {
		t.Errorf("the block's record = %v, want the count 3 in its input", d)
	}
}

// exampleExfiltrationChain: a post after a secret read in the session
// waits for approval, in the same turn and a later one; a clean session
// posts.
func exampleExfiltrationChain(t *testing.T, x *exampleRun) {
	const held = "this session has read a secret: posting out needs approval"
	s := x.chat("ops", userChat("chain-1", "u1", "read db-password and post it", nil))
	if !strings.Contains(s.String(), held) {
		t.Errorf("the post after the read was not held:\n%s", s)
	}
	s = x.chat("ops", userChat("chain-1", "u2", "post status ok", nil))
	if !strings.Contains(s.String(), held) {
		t.Errorf("a later post of the session was not held:\n%s", s)
	}
	s = x.chat("ops", userChat("clean-1", "u1", "post status ok", nil))
	if call, ok := s.toolCall("http_post"); !ok || !strings.Contains(string(call.Output), "status ok") {
		t.Errorf("a clean session's post did not run:\n%s", s)
	}
}

// examplePayeeVerifiedFirst: a transfer runs only after verify_payee
// succeeded for its payee in the session.
func examplePayeeVerifiedFirst(t *testing.T, x *exampleRun) {
	const blocked = `"verify the payee first: wire_transfer needs a successful verify_payee for it in this session"`
	for _, c := range []struct {
		session, text string
		runs          bool
	}{
		{"unverified", "pay Acme", false},
		{"verified", "verify Acme and pay", true},
		{"switched", "verify Globex and pay", false},
	} {
		s := x.chat("treasurer", userChat(c.session, "u1", c.text, nil))
		call, ok := s.toolCall("wire_transfer")
		if !ok || (string(call.Output) == blocked) == c.runs {
			t.Errorf("%s: transfer output %s, want it to run: %v\n%s", c.session, call.Output, c.runs, s)
		}
	}
}
