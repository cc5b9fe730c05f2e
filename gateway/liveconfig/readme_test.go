package liveconfig

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway/config"
)

// TestREADMERestartList: README.md's "Live configuration" names, in its
// list of what needs a restart, every top-level config key Diff refuses
// to change live: each key without live fields as `key`, and each with
// some (auth, limits, websocket, agents) as `key` or `key.field`, for its
// other fields.
func TestREADMERestartList(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "Everything\nelse needs a restart:")
	end := strings.Index(text, "An edit that changes any of these")
	if start < 0 || end < start {
		t.Fatal(`README.md has no "Everything else needs a restart: … An edit that changes any of these" paragraph`)
	}
	list := strings.Join(strings.Fields(text[start:end]), " ")
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
