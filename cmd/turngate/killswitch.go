package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/turngate/turngate/gateway/killswitch"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/internal/sameorigin"
)

const killSwitchUsage = `usage: turngate killswitch set|list|lift [flags]

Sets, lists and lifts the kill switches of a running gateway through its
admin API (POST, GET, DELETE /v1/admin/killswitch). The admin key is read
from $TURNGATE_ADMIN_KEY (or --key-file); the gateway from --url or
$TURNGATE_URL (default http://127.0.0.1:8080).

  turngate killswitch set --block tools|turns [--tool NAME]... [--tenant T] [--agent A]
                          --reason TEXT [--expires-in 30m | --expires-at RFC3339] [--allow-unknown-tools]
      stop the tool calls named (every tool call without --tool; * and ? are
      wildcards), or every turn, of the fleet, a tenant, an agent, or an agent
      of a tenant; prints the switch's id
  turngate killswitch list [--json]
      the switches in force
  turngate killswitch lift [--reason TEXT] ID
      lift a switch

Exit codes: 0 done, 1 refused by the gateway or unreachable, 2 usage.
`

// killSwitchClient talks to one gateway's admin API.
type killSwitchClient struct {
	base string
	key  string
	http *http.Client
}

// toolFlags collects repeated --tool flags.
type toolFlags []string

func (t *toolFlags) String() string     { return strings.Join(*t, ",") }
func (t *toolFlags) Set(v string) error { *t = append(*t, v); return nil }

// runKillSwitch runs turngate killswitch.
func runKillSwitch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, killSwitchUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("killswitch "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, killSwitchUsage) }
	base := fs.String("url", envOr("TURNGATE_URL", "http://127.0.0.1:8080"), "the gateway's base URL")
	keyFile := fs.String("key-file", "", "read the admin key from this file instead of $TURNGATE_ADMIN_KEY")
	var spec killswitch.Spec
	var tools toolFlags
	var expiresAt, reason string
	var asJSON bool
	switch sub {
	case "set":
		fs.StringVar(&spec.Block, "block", "", `what to stop: "tools" or "turns"`)
		fs.Var(&tools, "tool", "a tool name or pattern to stop (repeatable; none: every tool)")
		fs.StringVar(&spec.Scope.Tenant, "tenant", "", "only this tenant")
		fs.StringVar(&spec.Scope.Agent, "agent", "", "only this agent")
		fs.StringVar(&spec.ExpiresIn, "expires-in", "", "lift it by itself after this long (30m, 2h)")
		fs.StringVar(&expiresAt, "expires-at", "", "lift it by itself at this RFC 3339 time")
		fs.BoolVar(&spec.AllowUnknownTools, "allow-unknown-tools", false, "accept tool names the gateway does not know now")
		fs.StringVar(&spec.Reason, "reason", "", "why (required; audited)")
	case "list":
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	case "lift":
		fs.StringVar(&reason, "reason", "", "why (audited)")
	default:
		fmt.Fprintf(stderr, "turngate killswitch: unknown subcommand %q\n\n%s", sub, killSwitchUsage)
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case sub == "lift" && fs.NArg() != 1:
		fmt.Fprintf(stderr, "turngate killswitch lift: give the id of one switch (turngate killswitch list shows them), not %d arguments %q\n\n%s", fs.NArg(), fs.Args(), killSwitchUsage)
		return 2
	case sub != "lift" && fs.NArg() > 0:
		fmt.Fprintf(stderr, "turngate killswitch %s: unexpected arguments %q\n\n%s", sub, fs.Args(), killSwitchUsage)
		return 2
	}
	c, err := newKillSwitchClient(*base, *keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "turngate killswitch %s: %v\n", sub, err)
		return 2
	}
	switch sub {
	case "set":
		spec.Tools = tools
		if expiresAt != "" {
			at, err := time.Parse(time.RFC3339, expiresAt)
			if err != nil {
				fmt.Fprintf(stderr, "turngate killswitch set: --expires-at %q is not an RFC 3339 time (2026-12-02T09:00:00Z)\n", expiresAt)
				return 2
			}
			spec.ExpiresAt = &at
		}
		err = c.set(ctx, &spec, stdout)
	case "list":
		err = c.list(ctx, asJSON, stdout)
	case "lift":
		err = c.lift(ctx, fs.Arg(0), reason, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "turngate killswitch %s: %v\n", sub, err)
		return 1
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// newKillSwitchClient checks the gateway URL and reads the admin key.
func newKillSwitchClient(base, keyFile string) (*killSwitchClient, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the gateway URL %q (--url or $TURNGATE_URL) is not an http or https URL with a host", base)
	}
	key := os.Getenv("TURNGATE_ADMIN_KEY")
	if keyFile != "" {
		data, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("--key-file: %w", err)
		}
		key = strings.TrimSpace(string(data))
	}
	// The requests carry the admin key: a redirect is followed only on the
	// gateway's own origin, so the key never reaches another host.
	client := sameorigin.Client(&http.Client{Timeout: 30 * time.Second})
	return &killSwitchClient{base: strings.TrimRight(base, "/"), key: key, http: client}, nil
}

// do sends a request to the admin API and decodes a 2xx answer into out;
// another status is an error carrying the gateway's message.
func (c *killSwitchClient) do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e) == nil && e.Message != "" {
			return fmt.Errorf("the gateway answered %d %s: %s", resp.StatusCode, e.Code, e.Message)
		}
		return fmt.Errorf("the gateway answered %s", resp.Status)
	}
	return json.Unmarshal(data, out)
}

func (c *killSwitchClient) set(ctx context.Context, spec *killswitch.Spec, stdout io.Writer) error {
	var k store.KillSwitch
	if err := c.do(ctx, http.MethodPost, "/v1/admin/killswitch", spec, &k); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "set %s: %s\n", k.ID, describeSwitch(&k))
	return nil
}

func (c *killSwitchClient) list(ctx context.Context, asJSON bool, stdout io.Writer) error {
	var out struct {
		KillSwitches []store.KillSwitch `json:"killSwitches"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/admin/killswitch", nil, &out); err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out.KillSwitches)
	}
	if len(out.KillSwitches) == 0 {
		fmt.Fprintln(stdout, "no kill switch is in force")
		return nil
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tSTOPS\tSET BY\tREASON")
	for i := range out.KillSwitches {
		k := &out.KillSwitches[i]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.ID, describeSwitch(k), k.CreatedBy, k.Reason)
	}
	return w.Flush()
}

func (c *killSwitchClient) lift(ctx context.Context, id, reason string, stdout io.Writer) error {
	var k store.KillSwitch
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	if err := c.do(ctx, http.MethodDelete, "/v1/admin/killswitch/"+url.PathEscape(id), body, &k); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "lifted %s: %s\n", k.ID, describeSwitch(&k))
	return nil
}

// describeSwitch says what k stops, where and until when.
func describeSwitch(k *store.KillSwitch) string {
	what := "every turn"
	if k.Block == store.KillTools {
		what = "every tool call"
		if len(k.Tools) > 0 {
			what = "tool calls of " + strings.Join(k.Tools, ", ")
		}
	}
	where := "the whole fleet"
	switch {
	case k.Tenant != "" && k.Agent != "":
		where = fmt.Sprintf("agent %s of tenant %s", k.Agent, k.Tenant)
	case k.Tenant != "":
		where = "tenant " + k.Tenant
	case k.Agent != "":
		where = "agent " + k.Agent
	}
	until := "until lifted"
	if !k.ExpiresAt.IsZero() {
		until = "until " + k.ExpiresAt.Format(time.RFC3339)
	}
	return fmt.Sprintf("%s in %s, %s", what, where, until)
}
