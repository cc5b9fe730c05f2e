package liveconfig

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway/config"
)

// readmeLiveSection is README.md's "## Live configuration" section, its
// whitespace runs made single spaces.
func readmeLiveSection(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(data), "\n## Live configuration\n")
	if !ok {
		t.Fatal(`README.md has no "## Live configuration" section`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	return strings.Join(strings.Fields(sec), " ")
}

// TestREADMELiveFields keeps README's "Live configuration" true: it names
// every field that reloads live.
func TestREADMELiveFields(t *testing.T) {
	sec := readmeLiveSection(t)
	for _, f := range LiveFields {
		name := f[strings.LastIndex(f, ".")+1:]
		if strings.HasPrefix(f, "websocket.") {
			name = "WebSocket frame limits"
		}
		if !strings.Contains(sec, name) {
			t.Errorf("README's Live configuration does not name %s (%q)", f, name)
		}
	}
}

// TestREADMERestartList: README.md's "Live configuration" names, in its
// list of what needs a restart, every top-level config key Diff refuses
// to change live: each key without live fields as `key`, and each with
// some (auth, limits, websocket, agents) as `key` or `key.field`, for its
// other fields.
func TestREADMERestartList(t *testing.T) {
	sec := readmeLiveSection(t)
	start := strings.Index(sec, "Everything else needs a restart:")
	end := strings.Index(sec, "An edit that changes any of these")
	if start < 0 || end < start {
		t.Fatal(`README.md's Live configuration has no "Everything else needs a restart: … An edit that changes any of these" paragraph`)
	}
	list := sec[start:end]
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || key == "-" {
			continue
		}
		if isLive(key) {
			t.Errorf("the whole of %s is live: this test no longer fits LiveFields", key)
			continue
		}
		if !strings.Contains(list, "`"+key+"`") && !strings.Contains(list, "`"+key+".") {
			t.Errorf("README.md's restart-only list leaves out `%s` (Diff refuses a change to it):\n%s", key, list)
		}
	}
}
