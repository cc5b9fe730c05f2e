package tests

import (
	"fmt"
	"strings"
	"testing"
)

// exampleSessionMemory: the concierge's system prompt is built from its
// context blocks; the model's memory write is stored and read by a rule
// on the next turn, a write holding a password is blocked and never
// stored, and the long conversation is compacted into a stored summary
// that rules see, while the history keeps every message.
func exampleSessionMemory(t *testing.T, x *exampleRun) {
	const s = "guest-1"
	say := func(id, text string) string {
		return fmt.Sprint(x.chat("concierge", userChat(s, id, text, nil)))
	}
	if out := say("u1", "remember: allergic to nuts"); !strings.Contains(out, `"stored":true`) {
		t.Errorf("the memory write was not stored:\n%s", out)
	}
	if out := say("u2", "remember: my password is hunter2"); !strings.Contains(out, "the memory must not hold passwords or card numbers") {
		t.Errorf("the password write was not blocked:\n%s", out)
	}
	say("u3", "When is breakfast served, and is there a spa in the hotel?")
	say("u4", "Until when is the pool open in the evening, and can I bring my own towels?")
	say("u5", "What does a massage at the spa cost, and must I book it in advance?")
	recs := x.turnAudit(s, 5)

	turns := decisions(recs, "beforeTurn")
	if len(turns) < 3 {
		t.Fatalf("beforeTurn decisions %v, want the allergy rule on turns 2 to 5", turns)
	}
	third := turns[1] // the breakfast turn
	system, _ := third["decision"].(map[string]any)["system"].(string)
	for _, want := range []string{"## soul\nYou are the concierge of the Hotel Miramar.", "## house-rules\n", "Breakfast is served from 7 to 10.",
		"## memory (writable with the update_context tool, at most 60 tokens)\nWhat the guest told you about themselves.\nallergic to nuts",
		"The guest has a nut allergy"} {
		if !strings.Contains(system, want) {
			t.Errorf("the breakfast turn's system prompt lacks %q:\n%s", want, system)
		}
	}
	if strings.Contains(system, "hunter2") {
		t.Error("the blocked password reached the memory")
	}
	var compaction map[string]any
	for _, r := range recs {
		if r["kind"] == "compaction" {
			compaction = r
		}
	}
	if compaction == nil || compaction["reason"] != "threshold" || compaction["summary"] != "The guest asked about breakfast, the pool and the spa." {
		t.Fatalf("compaction record %v", compaction)
	}
	if last := turns[len(turns)-1]; !fired(last, "session.yaml#fewer-steps-once-compacted") {
		t.Errorf("the rule on turn.compacted did not fire on the last turn: %v", last["rulesFired"])
	}
	if h := x.history("concierge", s); len(h) != 10 {
		t.Errorf("history has %d messages, want all 10", len(h))
	}
}
