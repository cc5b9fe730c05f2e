// Command mcpserver is the end-to-end tests' stdio MCP server, built with
// the official MCP Go SDK. It offers read and delete tools over a pretend
// file system and appends one line per call, "<tool> <path>", to the file
// named by $MCP_CALL_LOG, so that a test can see which calls reached it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pathInput is the input of both tools.
type pathInput struct {
	Path string `json:"path" jsonschema:"the file's path"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "e2e-local", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "Reads a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathInput) (*mcp.CallToolResult, any, error) {
			return answer("read", in.Path, "contents of "+in.Path+" from local")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete", Description: "Deletes a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathInput) (*mcp.CallToolResult, any, error) {
			return answer("delete", in.Path, "deleted "+in.Path)
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

// answer logs the call and returns text as the tool's result.
func answer(tool, path, text string) (*mcp.CallToolResult, any, error) {
	if err := logCall(tool + " " + path); err != nil {
		return nil, nil, fmt.Errorf("logging the call: %w", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

// logCall appends line to $MCP_CALL_LOG, if set.
func logCall(line string) error {
	name := os.Getenv("MCP_CALL_LOG")
	if name == "" {
		return nil
	}
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
