package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/turngate/turngate/gateway/killswitch"
	"github.com/turngate/turngate/internal/sameorigin"
)

// killswitchCLI runs turngate killswitch with args and returns its exit
// code, stdout and stderr.
func killswitchCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(append([]string{"killswitch"}, args...)...)
}

// TestKillSwitchCLI: set, list and lift against a running gateway, as an
// operator would; the gateway's refusals are printed with exit 1, usage
// mistakes exit 2.
func TestKillSwitchCLI(t *testing.T) {
	keys := "auth:\n  apiKeys:\n    - {key: ops-7d2f9a1c5e8b3d6f0a4c7e1b9d2f5a8c, tenant: ops, subject: oncall, roles: [admin, global-admin]}\n    - {key: usr-3b8e1d6a9c2f5e0b7d4a1c8f3e6b9d2a, tenant: acme}\n"
	r := startServe(t, writeServeConfig(t, keys))
	url := "http://" + r.addr
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("ops-7d2f9a1c5e8b3d6f0a4c7e1b9d2f5a8c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TURNGATE_ADMIN_KEY", "")
	auth := []string{"--url", url, "--key-file", keyFile}

	code, _, stderr := killswitchCLI(t, append([]string{"set"}, append(auth, "--block", "tools", "--tool", "wether", "--reason", "r")...)...)
	if code != 1 || !strings.Contains(stderr, `"wether" matches none of the gateway's tools (did you mean "weather"?)`) {
		t.Errorf("misspelt tool: exit %d, stderr %q", code, stderr)
	}
	code, stdout, stderr := killswitchCLI(t, append([]string{"set"}, append(auth, "--block", "tools", "--tool", "weather", "--tenant", "acme",
		"--reason", "incident 9", "--expires-in", "2h")...)...)
	id := regexp.MustCompile(`ks_[0-9a-f-]+`).FindString(stdout)
	if code != 0 || id == "" || !strings.Contains(stdout, "tool calls of weather in tenant acme, until ") {
		t.Fatalf("set: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = killswitchCLI(t, append([]string{"list"}, auth...)...)
	if code != 0 || !strings.Contains(stdout, id) || !strings.Contains(stdout, "oncall") || !strings.Contains(stdout, "incident 9") {
		t.Errorf("list: exit %d, stdout %q", code, stdout)
	}
	req, _ := http.NewRequest("POST", url+"/v1/agents/demo/chat",
		strings.NewReader(`{"id":"s1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"weather in Paris"}]}]}`))
	req.Header.Set("Authorization", "Bearer usr-3b8e1d6a9c2f5e0b7d4a1c8f3e6b9d2a")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	resp.Body.Close()
	if !strings.Contains(body.String(), killswitch.ToolReason) {
		t.Errorf("the tenant's weather call was not stopped: %s", body.String())
	}

	code, stdout, stderr = killswitchCLI(t, append(append([]string{"lift"}, auth...), "--reason", "resolved", id)...)
	if code != 0 || !strings.Contains(stdout, "lifted "+id) {
		t.Errorf("lift: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = killswitchCLI(t, append([]string{"list"}, auth...)...)
	if code != 0 || !strings.Contains(stdout, "no kill switch is in force") {
		t.Errorf("list after the lift: exit %d, stdout %q", code, stdout)
	}
	code, _, stderr = killswitchCLI(t, append(append([]string{"lift"}, auth...), id)...)
	if code != 1 || !strings.Contains(stderr, "404 not_found") {
		t.Errorf("lifting twice: exit %d, stderr %q", code, stderr)
	}

	// Without the admin key, or with a user's key, the gateway refuses.
	code, _, stderr = killswitchCLI(t, "list", "--url", url)
	if code != 1 || !strings.Contains(stderr, "401 unauthorized") {
		t.Errorf("no key: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("TURNGATE_ADMIN_KEY", "usr-3b8e1d6a9c2f5e0b7d4a1c8f3e6b9d2a")
	code, _, stderr = killswitchCLI(t, "list", "--url", url)
	if code != 1 || !strings.Contains(stderr, "403 forbidden") {
		t.Errorf("a user's key: exit %d, stderr %q", code, stderr)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "usage: turngate killswitch"},
		{[]string{"stop"}, `unknown subcommand "stop"`},
		{[]string{"lift", "--url", url}, "lift: give the id of one switch (turngate killswitch list shows them), not 0 arguments"},
		{[]string{"list", "extra"}, `list: unexpected arguments ["extra"]`},
		{[]string{"set", "--url", "localhost:8080", "--block", "turns"}, `the gateway URL "localhost:8080" (--url or $TURNGATE_URL) is not an http or https URL`},
		{[]string{"set", "--url", url, "--block", "turns", "--reason", "r", "--expires-at", "tomorrow"}, `--expires-at "tomorrow" is not an RFC 3339 time`},
	} {
		if code, _, stderr := killswitchCLI(t, tc.args...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("killswitch %q: exit %d, want 2 (usage) and %q: %s", tc.args, code, tc.want, stderr)
		}
	}
}

// The CLI sends the admin key with every request: a gateway URL that
// redirects to another origin gets an error, and the other host never
// sees the key.
func TestKillSwitchCLIDoesNotFollowRedirectsAway(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"switches":[]}`)
	}))
	defer other.Close()
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer gw.Close()
	t.Setenv("TURNGATE_ADMIN_KEY", "ops-7d2f9a1c5e8b3d6f0a4c7e1b9d2f5a8c")
	c, err := newKillSwitchClient(gw.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	err = c.list(context.Background(), true, io.Discard)
	if !errors.Is(err, sameorigin.ErrCrossOrigin) {
		t.Errorf("list through a redirect to another origin: %v, want %v", err, sameorigin.ErrCrossOrigin)
	}
	if leaked.Load() {
		t.Error("the other origin received the admin key")
	}
}
