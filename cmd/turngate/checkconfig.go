package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/policy/ruleset"
)

// mcpCheckTimeout bounds check-config's attempt to reach the MCP servers.
const mcpCheckTimeout = 10 * time.Second

// runCheckConfig is `turngate check-config FILE`: every check serve makes
// before it listens (the config's keys and values, API keys present and
// not duplicated, model aliases, tool schemas, agents' tools, the rules
// directory, the scripted model's script, the context blocks' files),
// without serving. Unreachable
// MCP servers are warnings naming the server. Exit 1 on an error.
func runCheckConfig(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: turngate check-config FILE")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	path := fs.Arg(0)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := checkConfig(ctx, path, log); err != nil {
		fmt.Fprintf(stderr, "turngate check-config: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "ok: %s\n", path)
	return 0
}

// checkConfig loads the config at path and checks what serve would check
// before serving; warnings go to log.
func checkConfig(ctx context.Context, path string, log *slog.Logger) error {
	cfg, _, err := loadConfig(path, log)
	if err != nil {
		return err
	}
	if err := checkListen(cfg.Listen, cfg.Authenticated()); err != nil {
		return cfg.ErrorAt("listen", err)
	}
	if _, err := ruleset.NewManager(cfg.Rules.Dir, rulesOptions(cfg), log); err != nil {
		return rulesDirError(cfg, err)
	}
	if _, err := gateway.NewResolver(cfg); err != nil {
		return err
	}
	if len(cfg.MCPServers) > 0 {
		ctx, cancel := context.WithTimeout(ctx, mcpCheckTimeout)
		defer cancel()
		mcp, err := startMCP(ctx, cfg, log)
		if err != nil {
			return err
		}
		mcp.Close()
	}
	return nil
}
