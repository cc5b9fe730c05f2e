package sessionctx

import (
	"github.com/turngate/turngate/engine"
)

// bytesPerToken is the estimate's ratio: about four bytes of English text
// per token for the common BPE tokenizers. The estimate only stands in for
// the provider's count before a step has reported one, and bounds a
// writable block.
const bytesPerToken = 4

// messageOverhead is the tokens a message costs beyond its content (role
// and separators).
const messageOverhead = 4

// estimateTokens estimates the tokens of s.
func estimateTokens(s string) int { return (len(s) + bytesPerToken - 1) / bytesPerToken }

// estimateMessages estimates the tokens of msgs.
func estimateMessages(msgs []engine.ModelMessage) int {
	n := 0
	for i := range msgs {
		n += messageOverhead
		for _, c := range msgs[i].Content {
			n += estimateTokens(c.Text) + estimateTokens(string(c.Input)) + estimateTokens(string(c.Output))
		}
	}
	return n
}

// splitPoint returns the index where msgs splits into an older part to
// summarize and a recent part kept verbatim: at least keepLast messages
// are kept, and the recent part starts with a user message, so no tool
// call is parted from its result. 0 means nothing to summarize.
func splitPoint(msgs []engine.UIMessage, keepLast int) int {
	for i := len(msgs) - keepLast; i > 0; i-- {
		if msgs[i].Role == engine.RoleUser {
			return i
		}
	}
	return 0
}
