package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/net/netutil"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools/mcptool"
	"github.com/turngate/turngate/gateway"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/httpguard"
	"github.com/turngate/turngate/gateway/liveconfig"
	"github.com/turngate/turngate/gateway/metrics"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/startupmem"
	"github.com/turngate/turngate/policy/opa"
	"github.com/turngate/turngate/policy/ruleset"
	defaultrules "github.com/turngate/turngate/rules"
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
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
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
	cfg, rulesFS, err := loadConfig(p.ConfigPath, log)
	if err != nil {
		return err
	}
	if err := applyListen(cfg, p.Listen); err != nil {
		return err
	}
	if !cfg.Authenticated() {
		log.Warn("NO API KEYS CONFIGURED: every request is the anonymous admin of tenant \"default\"; serving on loopback only", "listen", cfg.Listen)
	}

	// Everything that can fail on the configuration's content is checked
	// before the store creates its file.
	m := metrics.New()
	rulesOpts := rulesOptions(cfg)
	rulesOpts.OnReload = func(result string, err error) {
		m.RuleReloads.WithLabelValues(result).Inc()
		if result == ruleset.ReloadFailure {
			m.RuleReloadRejections.WithLabelValues(ruleset.RejectReason(err)).Inc()
		}
	}
	var rules *ruleset.Manager
	if rulesFS != nil {
		rules, err = ruleset.NewManagerFS(rulesFS, embeddedRules, rulesOpts, log)
	} else if rules, err = ruleset.NewManager(cfg.Rules.Dir, rulesOpts, log); err != nil {
		err = rulesDirError(cfg, err)
	}
	if err != nil {
		return err
	}
	models, err := gateway.NewResolver(cfg)
	if err != nil {
		return err
	}

	st, err := openStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	log.Info("store opened", "driver", cfg.Store.Driver)

	tracer, stopTracing, err := startTracing(cfg.Tracing, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	engOpts := engineOptions(cfg, m.Resolver(models), log)
	engOpts.Tracer = tracer
	eng := engine.New(engOpts)

	var mcp *mcptool.Manager
	if len(cfg.MCPServers) > 0 {
		if mcp, err = startMCP(ctx, cfg, log); err != nil {
			return err
		}
		defer mcp.Close()
	}

	auditLog, err := audit.Open(cfg.Audit, p.Stdout, log)
	if err != nil {
		return err
	}
	defer auditLog.Close()

	var gw *gateway.Server
	var live *liveconfig.Manager
	if p.ConfigPath != "" {
		live = liveConfig(p, cfg, m, log, func(next *config.Config) error { return gw.ApplyConfig(next) })
	}
	gw, err = gateway.New(gateway.Options{Config: cfg, LiveConfig: live, Engine: eng, Store: st, Rules: rules, MCP: mcp,
		Audit: auditLog, Metrics: m, Logger: log})
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	// No ReadTimeout or WriteTimeout: they would cut chat streams and
	// resumes. The body's read deadline is set per request (limits.readBodyTimeout).
	ln = netutil.LimitListener(ln, cfg.Limits.MaxConnections)
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout,
		IdleTimeout: cfg.Limits.IdleTimeout, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	var metricsLn net.Listener
	if cfg.Metrics.Listen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
			ln.Close()
			return fmt.Errorf("listening for metrics: %w", err)
		}
		defer metricsLn.Close()
	}
	if err := gw.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	if metricsLn != nil {
		go serveMetrics(metricsLn, gw.MetricsHandler(), cfg, log)
	}

	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	if *cfg.Rules.Watch && rulesFS == nil {
		go func() {
			if err := rules.Watch(bg); err != nil {
				log.Error("rules watch stopped", "err", err)
			}
		}()
	}
	if live != nil {
		go func() {
			if err := live.Watch(bg); err != nil {
				log.Error("config watch stopped", "err", err)
			}
		}()
	}
	go reloadOnHangup(bg, p.Hangup, log, rules, live)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	// Start-up read most of the binary and left its garbage on the heap:
	// give both back, so idle RSS is what serving uses.
	if _, err := startupmem.Release(); err != nil {
		log.Debug("startup memory not released", "err", err)
	}
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

// liveConfig returns the live configuration of the file p names, cfg
// its startup load: each reload is checked as serve checked cfg (the
// --listen flag, a public address without credentials), applied with
// apply (the gateway's ApplyConfig) and counted in m.
func liveConfig(p serveParams, cfg *config.Config, m *metrics.Metrics, log *slog.Logger, apply func(*config.Config) error) *liveconfig.Manager {
	for _, result := range []string{liveconfig.ReloadAccepted, liveconfig.ReloadRejected} {
		m.ConfigReloads.WithLabelValues(result) // both series from the start, at 0
	}
	return liveconfig.New(p.ConfigPath, cfg, liveconfig.Options{
		Apply:  apply,
		Check:  func(next *config.Config) error { return applyListen(next, p.Listen) },
		Logger: log,
		OnReload: func(result string, _ error) {
			rejected := 0.0
			switch result {
			case liveconfig.ReloadRejected:
				rejected = 1
				fallthrough
			case liveconfig.ReloadAccepted:
				m.ConfigReloads.WithLabelValues(result).Inc()
			}
			m.ConfigReloadRejected.Set(rejected)
		},
	})
}

// reloadOnHangup reloads the rules, then the config file (live; nil
// without one), each time a request arrives on reqs (SIGHUP), until ctx
// is done or reqs is closed. Each reload logs and records its outcome.
func reloadOnHangup(ctx context.Context, reqs <-chan os.Signal, log *slog.Logger, rules *ruleset.Manager, live *liveconfig.Manager) {
	for {
		select {
		case <-ctx.Done():
			return
		case sig, ok := <-reqs:
			if !ok {
				return
			}
			log.Info("reloading the rules and the config on request", "signal", sig.String())
			_, _ = rules.Reload()
			if live != nil {
				_, _ = live.Reload()
			}
		}
	}
}

// applyListen sets cfg's listen address to the --listen flag's when it is
// given, and refuses a non-loopback address without credentials
// (checkListen), positioned at the file's listen unless the flag set it.
func applyListen(cfg *config.Config, flag string) error {
	if flag != "" {
		cfg.Listen = flag
	}
	if err := checkListen(cfg.Listen, cfg.Authenticated()); err != nil {
		if flag != "" {
			return err // the flag's, not the file's
		}
		return cfg.ErrorAt("listen", err)
	}
	return nil
}

// serveMetrics serves GET /metrics alone on ln (metrics.listen) until ln
// is closed. Without metrics.key, a listener on a loopback address answers
// only requests for a loopback Host (DNS rebinding).
func serveMetrics(ln net.Listener, h http.Handler, cfg *config.Config, log *slog.Logger) {
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsLoopback() && cfg.Metrics.KeySHA256 == "" {
		// Keyless on loopback: only programs of this machine may scrape it,
		// not a web page rebound to 127.0.0.1.
		h = httpguard.RequireLoopbackHost(h)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout, IdleTimeout: cfg.Limits.IdleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	log.Info("serving metrics", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, net.ErrClosed) {
		log.Error("serving metrics", "err", err)
	}
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

// rulesOptions are the options cfg loads its rules with (serve and
// check-config).
func rulesOptions(cfg *config.Config) ruleset.Options {
	spec := opa.SpecialiseOff
	if cfg.Rules.SpecialiseRules() {
		spec = opa.SpecialiseOn
	}
	return ruleset.Options{
		OPA:          opa.Options{BodySchema: cfg.BodySchema(), Specialise: spec},
		PollInterval: cfg.Rules.PollInterval,
		Tests:        testGate(cfg.Rules.RequireTests),
	}
}

// embeddedRules names the rule set compiled into the binary in logs and in
// the admin API's status.
const embeddedRules = "(embedded default rules)"

// loadConfig loads the file at path, or the embedded default
// configuration when path is empty. The default's relative paths (./rules,
// ./data) are the working directory's; when it has no rules directory,
// rulesFS is the default rule set compiled into the binary (served from
// memory, not watched), so `turngate serve` runs in any directory.
func loadConfig(path string, log *slog.Logger) (cfg *config.Config, rulesFS fs.FS, err error) {
	if path != "" {
		cfg, err = config.Load(path)
		return cfg, nil, err
	}
	if cfg, err = config.Default(); err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(cfg.Rules.Dir); errors.Is(err, fs.ErrNotExist) {
		log.Info("no ./rules directory: serving the embedded default rules (create ./rules, or use --config, to edit them)")
		return cfg, defaultrules.FS, nil
	}
	return cfg, nil, nil
}

// startMCP starts the MCP servers' manager. A server that cannot be reached
// is a warning naming it, not a failure: the manager keeps retrying it and
// the other servers' tools are served. Agent tools that no server lists
// once the reachable ones have started are warned about too.
func startMCP(ctx context.Context, cfg *config.Config, log *slog.Logger) (*mcptool.Manager, error) {
	mcp, err := mcptool.NewManager(cfg.MCPServers, mcptool.WithLogger(log))
	if err != nil {
		return nil, err
	}
	if err := mcp.Start(ctx); err != nil {
		log.Warn("MCP servers unreachable at startup; retrying in the background", "err", err)
	}
	for _, w := range missingAgentTools(cfg, mcp.Tools()) {
		log.Warn(w)
	}
	return mcp, nil
}

// missingAgentTools lists agents' tools that are neither configured tools
// nor listed by an MCP server.
func missingAgentTools(cfg *config.Config, listed []engine.Tool) []string {
	known := map[string]bool{}
	for _, t := range cfg.Tools {
		known[t.Name] = true
	}
	for _, t := range listed {
		known[t.Name] = true
	}
	var out []string
	for _, a := range cfg.Agents {
		for _, t := range a.Tools {
			if !known[t] {
				out = append(out, fmt.Sprintf("agent %q: tool %q is neither configured nor listed by a reachable MCP server", a.Name, t))
			}
		}
	}
	return out
}

// rulesDirError positions err, the rules' failure to load, at the config's
// rules.dir when that is not a directory the gateway can read; the errors
// of the rule files name their own files.
func rulesDirError(cfg *config.Config, err error) error {
	if st, serr := os.Stat(cfg.Rules.Dir); serr != nil || !st.IsDir() {
		return cfg.ErrorAt("rules.dir", err)
	}
	return err
}

// checkListen refuses a non-loopback listen address without API keys:
// every request would be the anonymous admin.
func checkListen(listen string, keys bool) error {
	if !keys && !loopback(listen) {
		return fmt.Errorf("refusing to listen on %s without API keys: configure auth.apiKeys or auth.jwt, or listen on loopback (127.0.0.1)", listen)
	}
	return nil
}

// loopback reports whether addr's host is a loopback address or localhost.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && httpguard.LoopbackName(host)
}
