package mcptool

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// output maps an MCP tool result to the tool's output: structured content
// as its JSON; otherwise one content as a JSON string (text) or its JSON
// object (images, resources…), several contents as an array of those. An
// error result becomes an error carrying its text.
func output(res *mcp.CallToolResult) (json.RawMessage, error) {
	if res.IsError {
		msg := strings.TrimSpace(texts(res.Content))
		if msg == "" {
			msg = "the tool reported an error without a message"
		}
		return nil, errors.New(msg)
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("encoding structured content: %w", err)
		}
		return b, nil
	}
	parts := make([]json.RawMessage, 0, len(res.Content))
	for _, c := range res.Content {
		var v any = c
		if t, ok := c.(*mcp.TextContent); ok {
			v = t.Text
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encoding content: %w", err)
		}
		parts = append(parts, b)
	}
	switch len(parts) {
	case 0:
		return json.RawMessage("null"), nil
	case 1:
		return parts[0], nil
	}
	return json.Marshal(parts)
}

// texts joins the text contents with newlines.
func texts(contents []mcp.Content) string {
	var b strings.Builder
	for _, c := range contents {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// maxLogLine bounds one logged chunk of a stdio server's stderr.
const maxLogLine = 1 << 10

// logWriter logs what a stdio server writes to stderr, one record per
// write, so that its diagnostics reach the gateway's log.
type logWriter struct {
	log    *slog.Logger
	server string
}

// Write logs p (cut to maxLogLine bytes) and never fails.
func (w *logWriter) Write(p []byte) (int, error) {
	line := p
	if len(line) > maxLogLine {
		line = line[:maxLogLine]
	}
	if s := strings.TrimSpace(strings.ToValidUTF8(string(line), "\uFFFD")); s != "" {
		w.log.Info("mcp server stderr", "mcpServer", w.server, "text", s)
	}
	return len(p), nil
}
