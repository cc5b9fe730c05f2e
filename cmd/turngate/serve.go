package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/mcptool"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/metrics"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy/opa"
	"github.com/turngate/turngate/policy/ruleset"
)

// serveParams are turngate serve's inputs.
type serveParams struct {
	// ConfigPath is the YAML config; empty runs the embedded default.
	ConfigPath string
	// Listen overrides the config's listen address.
	Listen string
	// Stdout receives the audit log (sink stdout); Stderr the logs.
	Stdout, Stderr io.Writer
	// Ready, if set, is called with the bound address once serving.
	Ready func(addr string)
	// Hangup delivers reload requests (SIGHUP); nil means none.
	Hangup <-chan os.Signal
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := serveParams{Stdout: stdout, Stderr: stderr}
	fs.StringVar(&p.ConfigPath, "config", "", "YAML config `file` (default: the embedded demo config)")
	fs.StringVar(&p.Listen, "listen", "", "listen `address` (host:port), overriding the config")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "turngate serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	p.Hangup = hup
	if err := serve(ctx, p); err != nil {
		fmt.Fprintf(stderr, "turngate serve: %v\n", err)
		return 1
	}
	return 0
}

// serve runs the gateway until ctx is cancelled, then shuts down
// gracefully: it stops accepting, lets in-flight turns finish for the
// configured shutdown timeout, then aborts them (their partial messages
// are persisted).
func serve(ctx context.Context, p serveParams) error {
	log := slog.New(slog.NewTextHandler(p.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := loadConfig(p.ConfigPath)
	if err != nil {
		return err
	}
	if p.Listen != "" {
		cfg.Listen = p.Listen
	}
	if len(cfg.Auth.APIKeys) == 0 {
		if !loopback(cfg.Listen) {
			return fmt.Errorf("refusing to listen on %s without API keys: configure auth.apiKeys or listen on loopback (127.0.0.1)", cfg.Listen)
		}
		log.Warn("NO API KEYS CONFIGURED: every request is the anonymous admin of tenant \"default\"; serving on loopback only", "listen", cfg.Listen)
	}

	st, err := openStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	log.Info("store opened", "driver", cfg.Store.Driver)

	m := metrics.New()
	rules, err := ruleset.NewManager(cfg.Rules.Dir, ruleset.Options{
		OPA:          opa.Options{BodySchema: cfg.BodySchema()},
		PollInterval: cfg.Rules.PollInterval,
		Tests:        testGate(cfg.Rules.RequireTests),
		OnReload: func(result string, err error) {
			m.RuleReloads.WithLabelValues(result).Inc()
			if result == ruleset.ReloadFailure {
				m.RuleReloadRejections.WithLabelValues(ruleset.RejectReason(err)).Inc()
			}
		},
	}, log)
	if err != nil {
		return err
	}

	models, err := gateway.NewResolver(cfg)
	if err != nil {
		return err
	}
	eng := engine.New(engineOptions(cfg, m.Resolver(models), log))

	var mcp *mcptool.Manager
	if len(cfg.MCPServers) > 0 {
		if mcp, err = mcptool.NewManager(cfg.MCPServers, mcptool.WithLogger(log)); err != nil {
			return err
		}
		if err := mcp.Start(ctx); err != nil {
			return err
		}
		defer mcp.Close()
	}

	auditLog, err := audit.Open(cfg.Audit, p.Stdout, log)
	if err != nil {
		return err
	}
	defer auditLog.Close()

	gw, err := gateway.New(gateway.Options{Config: cfg, Engine: eng, Store: st, Rules: rules, MCP: mcp,
		Audit: auditLog, Metrics: m, Logger: log})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	if err := gw.Start(ctx); err != nil {
		ln.Close()
		return err
	}

	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	if *cfg.Rules.Watch {
		go func() {
			if err := rules.Watch(bg); err != nil {
				log.Error("rules watch stopped", "err", err)
			}
		}()
	}
	go rules.ReloadOn(bg, p.Hangup)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("turngate serving", "addr", ln.Addr().String(), "agents", len(cfg.Agents), "rules", rules.Current().ID())
	if p.Ready != nil {
		p.Ready(ln.Addr().String())
	}

	select {
	case err := <-serveErr:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", cfg.Limits.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Limits.ShutdownTimeout)
	defer cancel()
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Shutdown(sctx) }()
	if err := gw.Shutdown(sctx); err != nil {
		log.Warn("in-flight turns were aborted at the shutdown deadline", "err", err)
	}
	// Streams end with their turns; give their handlers a moment to
	// write the last frames, then close what is left.
	select {
	case <-httpDone:
	case <-time.After(2 * time.Second):
		srv.Close()
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

// testGate maps rules.requireTests to the rule set's test gate: unset runs
// the tests when there are any, true requires them, false skips them.
func testGate(require *bool) ruleset.TestGate {
	switch {
	case require == nil:
		return ruleset.TestsIfPresent
	case *require:
		return ruleset.TestsRequired
	}
	return ruleset.TestsOff
}

// storeOpenTimeout bounds connecting to PostgreSQL and migrating it at
// startup: a server that does not answer fails the start instead of
// hanging it.
const storeOpenTimeout = time.Minute

// openStore opens the store cfg names: a SQLite file (the embedded default)
// or a PostgreSQL database.
func openStore(ctx context.Context, cfg config.Store) (store.Store, error) {
	if cfg.Driver == config.StorePostgres {
		ctx, cancel := context.WithTimeout(ctx, storeOpenTimeout)
		defer cancel()
		st, err := store.OpenPostgres(ctx, cfg.DSN)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	st, err := store.OpenSQLite(cfg.Path, store.WithSynchronous(cfg.Synchronous))
	if err != nil {
		return nil, err
	}
	return st, nil
}

// engineOptions are the engine's options from cfg's tool limits.
func engineOptions(cfg *config.Config, models engine.ModelResolver, log *slog.Logger) engine.Options {
	return engine.Options{
		Models:             models,
		Logger:             log,
		MaxConcurrentTools: cfg.Limits.MaxConcurrentTools,
		ToolTimeout:        cfg.Limits.ToolTimeout,
		MaxOutputBytes:     cfg.Limits.MaxToolOutputBytes,
	}
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default()
	}
	return config.Load(path)
}

// loopback reports whether addr's host is a loopback address or localhost.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
