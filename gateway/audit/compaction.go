package audit

import (
	"github.com/turngate/turngate/engine"
)

// KindCompaction is the audit line of a conversation compaction.
const KindCompaction = "compaction"

// Compaction is the audit record of one compaction: the summary that
// replaces the first MessageCount stored messages of a session, through
// ThroughMessageID (the transcript itself is kept whole).
type Compaction struct {
	Identity
	// Reason is "threshold" (compaction.after was passed) or "overflow"
	// (the upstream rejected a step as too long).
	Reason           string `json:"reason"`
	InputTokens      int    `json:"inputTokens,omitempty"`
	ThroughMessageID string `json:"throughMessageId"`
	MessageCount     int    `json:"messageCount"`
	Model            string `json:"model"`
	Summary          string `json:"summary"`
}

// Compaction writes one compaction record for the turn id.
func (l *Log) Compaction(id *engine.Identity, c *Compaction) {
	c.Identity = identity(l.now(), id)
	l.write(KindCompaction, c)
}
