package tests

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exampleLiveConfig: a key added to the running gateway's turngate.yaml
// works without a restart; a bad limit is rejected at its line and column
// (GET /v1/admin/config, turngate_config_reload_rejected) while the keys of
// the last good config keep working.
func exampleLiveConfig(t *testing.T, x *exampleRun) {
	const globexKey = "globex-demo-3d9f7a1e5c2b8d4f6a0e9c7b1d3f5a2e"
	ops, acme, globex := x.as("ops-demo-7c0e1d4b9a3f2e6d8b5a4c3e2f1d0a9b"), x.as("acme-demo-5b8e2f1c9d4a7e3b6c0f8a2d4e1b7c9f"), x.as(globexKey)
	path := filepath.Join(x.dir, "turngate.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	globex.json(http.MethodGet, "/v1/agents", nil, http.StatusUnauthorized, nil)

	withGlobex := string(orig) + "    - {key: " + globexKey + ", tenant: globex, subject: bob}\n"
	write(withGlobex)
	poll(t, "globex's key to work", func() error {
		if code, err := globex.getJSON("/v1/agents", nil); err != nil || code != http.StatusOK {
			return fmt.Errorf("GET /v1/agents with globex's key: %d %v", code, err)
		}
		return nil
	})
	call, ok := globex.chat("assistant", userChat("globex-1", "u1", "weather in Oslo", nil)).toolCall("weather")
	if !ok || !strings.HasPrefix(string(call.Output), `{"city":"Oslo"`) {
		t.Errorf("globex's weather call: %s (%v)", call.Output, ok)
	}

	write(strings.Replace(withGlobex, "maxMessages: 200", "maxMessages: -1", 1))
	type diagnostic struct {
		Code     string
		Location struct {
			File         string
			Line, Column int
		}
		Message string
	}
	poll(t, "the rejection at its line and column", func() error {
		var st struct{ LastError []diagnostic }
		if code, err := ops.getJSON("/v1/admin/config", &st); err != nil || code != http.StatusOK {
			return fmt.Errorf("GET /v1/admin/config: %d %v", code, err)
		}
		want := diagnostic{Code: "config_invalid", Message: "limits.maxMessages: must not be negative, not -1"}
		want.Location.File, want.Location.Line, want.Location.Column = "turngate.yaml", 55, 16
		if len(st.LastError) != 1 || st.LastError[0] != want {
			return fmt.Errorf("lastError %+v, want %+v", st.LastError, want)
		}
		return nil
	})
	resp := ops.do(http.MethodGet, "/metrics", nil)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "\nturngate_config_reload_rejected 1\n") {
		t.Error("turngate_config_reload_rejected is not 1 after the rejection")
	}
	for name, g := range map[string]*gateway{"acme": acme, "globex": globex} {
		if code, err := g.getJSON("/v1/agents", nil); err != nil || code != http.StatusOK {
			t.Errorf("%s's key of the last good config: %d %v", name, code, err)
		}
	}
}
