package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/turngate/turngate/internal/childenv"
)

// Extension transports.
const (
	// TransportHTTP POSTs each delivery as JSON to a URL, signed with an
	// HMAC-SHA256 of the body.
	TransportHTTP = "http"
	// TransportExec runs a long-lived child process that reads one JSON
	// delivery per line on stdin and answers one JSON line on stdout.
	TransportExec = "exec"
)

// ExtensionHooks are the hooks an extension can subscribe to: the
// reference's extension subscription set (beforeStep is not dispatched to
// extensions).
var ExtensionHooks = []string{"beforeTurn", "beforeToolCall", "afterToolCall", "onStepFinish", "onChunk"}

// Extension defaults and bounds.
const (
	// DefaultExtensionTimeout is the reference's hookTimeout (5000 ms).
	DefaultExtensionTimeout = 5 * time.Second
	// DefaultExtensionQueue is how many observation deliveries (chunks
	// count one each) wait for an extension before new ones are dropped.
	DefaultExtensionQueue = 1024
	// MinExtensionSecret is the shortest HMAC secret accepted: 16 bytes,
	// 128 bits when random.
	MinExtensionSecret = 16
)

// Extension is an outside program subscribed to some of a turn's hooks.
// It observes them, and its beforeTurn result may change the turn's
// configuration within what the rules allow (docs/EXTENSIONS.md).
type Extension struct {
	// Name identifies the extension in logs, metrics and deliveries.
	Name string `yaml:"name"`
	// Transport is http or exec.
	Transport string `yaml:"transport"`
	// URL receives the http transport's POSTs.
	URL string `yaml:"url"`
	// Secret keys the http transport's HMAC-SHA256 signature, usually
	// "${SOME_ENV_VAR}"; it is never logged.
	Secret string `yaml:"secret"`
	// Command is the exec transport's program and arguments; a relative
	// program path with a slash resolves against the config's directory.
	Command []string `yaml:"command"`
	// Env is the exec transport's environment beyond the few variables
	// the process inherits from the gateway (PATH, HOME, USER, LOGNAME,
	// SHELL, TERM, TMPDIR, LANG: childenv.Inherited), usually
	// "${SOME_ENV_VAR}" values: the gateway's own secrets (upstream keys,
	// the database DSN) are never passed on.
	Env map[string]string `yaml:"env"`
	// Hooks are the hooks the extension subscribes to (ExtensionHooks).
	Hooks []string `yaml:"hooks"`
	// Timeout bounds each delivery (default 5s): beforeTurn waits at most
	// this long for the extension's answer.
	Timeout time.Duration `yaml:"timeout"`
	// Agents, when set, limits the extension to these agents' turns.
	Agents []string `yaml:"agents"`
	// QueueSize bounds the observation deliveries waiting for the
	// extension (default 1024); more are dropped and counted.
	QueueSize int `yaml:"queueSize"`
}

// applyExtensionDefaults fills the extensions' unset timeouts and queues.
func (c *Config) applyExtensionDefaults() {
	for i := range c.Extensions {
		x := &c.Extensions[i]
		if x.Timeout == 0 {
			x.Timeout = DefaultExtensionTimeout
		}
		if x.QueueSize == 0 {
			x.QueueSize = DefaultExtensionQueue
		}
	}
}

// validateExtensions reports, through add, every inconsistent extension
// setting, each at the field path of the value it is about.
func (c *Config) validateExtensions(add func(path, format string, args ...any)) {
	names := map[string]bool{}
	for i, x := range c.Extensions {
		item := fmt.Sprintf("extensions[%d]", i)
		at := func(field, format string, args ...any) {
			add(item+"."+field, "%s (%s): "+format, append([]any{item, x.Name}, args...)...)
		}
		switch {
		case x.Name == "":
			add(item+".name", "%s: name is required", item)
		case names[x.Name]:
			add(item+".name", "%s: duplicate extension %q", item, x.Name)
		}
		names[x.Name] = true
		switch x.Transport {
		case TransportHTTP:
			if u, err := url.Parse(x.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				at("url", "url: must be an absolute http or https URL, not %q", x.URL)
			}
			if len(x.Secret) < MinExtensionSecret {
				at("secret", "secret: the http transport signs every request; set a secret of at least %d characters (e.g. secret: ${EXTENSION_SECRET})", MinExtensionSecret)
			}
			if len(x.Command) > 0 {
				at("command", "command: an exec setting; the http transport takes url")
			}
			if len(x.Env) > 0 {
				at("env", "env: an exec setting; the http transport starts no process")
			}
		case TransportExec:
			if len(x.Command) == 0 || x.Command[0] == "" {
				at("command", "command: required with transport: exec (the program and its arguments)")
			}
			for _, k := range slices.Sorted(maps.Keys(x.Env)) {
				if err := childenv.CheckName(k); err != nil {
					at("env."+k, "env: %v", err)
				}
			}
			switch {
			case x.URL != "":
				at("url", "url and secret: http settings; the exec transport takes command")
			case x.Secret != "":
				at("secret", "url and secret: http settings; the exec transport takes command")
			}
		default:
			at("transport", "transport: must be http or exec, not %q", x.Transport)
		}
		if len(x.Hooks) == 0 {
			at("hooks", "hooks: subscribe to at least one of %s", strings.Join(ExtensionHooks, ", "))
		}
		for j, h := range x.Hooks {
			hook := fmt.Sprintf("hooks[%d]", j)
			switch {
			case h == "beforeStep":
				at(hook, "hooks: beforeStep is not dispatched to extensions (as in the reference); use beforeTurn or a CEL rule")
			case !slices.Contains(ExtensionHooks, h):
				at(hook, "hooks: unknown hook %q (want %s)", h, strings.Join(ExtensionHooks, ", "))
			case slices.Contains(x.Hooks[:j], h):
				at(hook, "hooks: %s is listed twice", h)
			}
		}
		if x.Timeout < 0 {
			at("timeout", "timeout: must be positive, not %s", x.Timeout)
		}
		if x.QueueSize < 0 {
			at("queueSize", "queueSize: must be positive, not %d", x.QueueSize)
		}
		for k, a := range x.Agents {
			if _, ok := c.Agent(a); !ok {
				at(fmt.Sprintf("agents[%d]", k), "agents: unknown agent %q", a)
			}
		}
	}
}

// checkCommands reports, each at its program, the exec extensions whose
// program cannot be started: a path (one with a slash, resolved against
// the config's directory) that is missing, a directory or not executable,
// or a bare name that no directory of PATH holds. The gateway would
// otherwise start and retry the process forever; Load calls it.
func (c *Config) checkCommands() error {
	var errs []error
	for i, x := range c.Extensions {
		if x.Transport != TransportExec || len(x.Command) == 0 || x.Command[0] == "" {
			continue // validateExtensions reports these
		}
		prog := x.Command[0]
		_, err := exec.LookPath(prog)
		var why string
		switch {
		case err == nil:
			continue
		case errors.Is(err, exec.ErrNotFound):
			why = fmt.Sprintf("%q is not in PATH (a path with a slash is relative to the config's directory)", prog)
		case errors.Is(err, fs.ErrNotExist):
			why = fmt.Sprintf("%s does not exist", prog)
		case errors.Is(err, fs.ErrPermission):
			why = fmt.Sprintf("%s is not executable", prog)
		case errors.Is(err, syscall.EISDIR):
			why = fmt.Sprintf("%s is a directory", prog)
		default:
			why = err.Error()
		}
		errs = append(errs, atField(fmt.Sprintf("extensions[%d].command[0]", i), "extensions[%d] (%s): command: %s", i, x.Name, why))
	}
	return errors.Join(errs...)
}
