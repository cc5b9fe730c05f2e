package tests

import (
	"strings"
	"testing"
)

// exampleRedactBeforePersist: the running turn's model and tool see the
// card number; the stored session, the next turn's history and the audit
// log hold "[card ending 1234]" only.
func exampleRedactBeforePersist(t *testing.T, x *exampleRun) {
	const number, masked = "4111 1111 1111 1234", "[card ending 1234]"
	s := x.chat("payments", userChat("pay-1", "u1", "charge 25 to "+number, nil))
	if !strings.Contains(s.text(), "Charging 25 to "+number) {
		t.Errorf("the running turn's model did not see the number:\n%s", s)
	}
	if call, ok := s.toolCall("charge"); !ok || !strings.Contains(string(call.Input), number) {
		t.Errorf("the charge tool did not get the number:\n%s", s)
	}
	stored := x.history("payments", "pay-1")
	if len(stored) != 2 || stored[0].text() != "charge 25 to "+masked {
		t.Fatalf("stored session %+v, want the user message masked", stored)
	}
	recs := x.turnAudit("pay-1", 1)
	var persisted int
	for _, r := range recs {
		if r["hook"] == "beforePersist" {
			persisted++
		}
	}
	if persisted != 2 {
		t.Errorf("%d beforePersist records, want one per stored message", persisted)
	}
	for _, r := range append(recs, x.auditRecords()...) {
		if line := mustJSON(t, r); strings.Contains(line, "4111") {
			t.Errorf("an audit record holds the card number: %s", line)
		}
	}
	if tc, _ := turnRecord(t, recs)["toolCalls"].([]any); len(tc) != 1 || !strings.Contains(mustJSON(t, tc[0]), masked) {
		t.Errorf("turn record calls = %v, want the call masked as stored", tc)
	}
}
