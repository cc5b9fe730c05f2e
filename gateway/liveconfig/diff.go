package liveconfig

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/turngate/turngate/gateway/config"
)

// LiveFields are the config fields a reload changes on a running gateway,
// as field paths ("agents[*]" is every agent). A change anywhere else
// needs a restart, and a reload that makes one is refused whole.
var LiveFields = []string{
	"auth.apiKeys",
	"auth.jwt",
	"limits.maxBodyBytes",
	"limits.maxMessages",
	"limits.turnTimeout",
	"limits.readBodyTimeout",
	"limits.approvalExpiry",
	"limits.maxQueuedSubmissionsPerSession",
	"limits.maxQueuedSubmissionsPerTenant",
	"limits.attachments",
	// A turn takes its tool limits when it starts; the keep-alive of a
	// held stream and the turn queue's bound are read per request.
	"limits.toolTimeout",
	"limits.maxToolOutputBytes",
	"limits.maxConcurrentTools",
	"limits.streamKeepAlive",
	"limits.maxQueuedTurnsPerSession",
	// The WebSocket frame limits default to limits.maxBodyBytes; a
	// connection takes them when it opens.
	"websocket.maxFrameBytes",
	"websocket.unauthenticatedFrameBytes",
	// A quota's limit, not what it limits (quotaKinds): the counts in the
	// store go on, the next check reads the new limit.
	"quotas[*].turns",
	"quotas[*].inputTokens",
	"quotas[*].outputTokens",
	"agents[*].tools",
	"agents[*].activeTools",
	"agents[*].attachments",
}

// RestartError says that a field that needs a restart changed: Path is the
// field ("listen", "store.dsn", "agents[0].model").
type RestartError struct {
	Path string
}

func (e *RestartError) Error() string { return e.Path + " changed: needs a restart" }

// Diff returns nil when next differs from live only in LiveFields, or
// else a *RestartError for each field that needs a restart, positioned in
// next's file (config.ErrorAt) and joined. Switching between a gateway
// with credentials (auth.apiKeys or auth.jwt) and one without any is a
// restart too: a keyless gateway serves loopback only and the anonymous
// admin, which is decided at start.
func Diff(live, next *config.Config) error {
	var paths []string
	walk(reflect.ValueOf(live).Elem(), reflect.ValueOf(next).Elem(), "", &paths)
	if live.Authenticated() != next.Authenticated() {
		paths = append(paths, "auth")
	}
	paths = append(paths, quotaKinds(live, next)...)
	errs := make([]error, len(paths))
	for i, p := range paths {
		errs[i] = next.ErrorAt(p, &RestartError{Path: p})
	}
	return errors.Join(errs...)
}

// quotaKinds returns the path of the limit of each quota of next that
// limits another thing (turns, inputTokens, outputTokens) than the live
// one: its declared state is another, a restart. Quota lists of other
// lengths are one difference already (walk).
func quotaKinds(live, next *config.Config) []string {
	if len(live.Quotas) != len(next.Quotas) {
		return nil
	}
	var out []string
	for i := range next.Quotas {
		was, _ := live.Quotas[i].Limit()
		if is, _ := next.Quotas[i].Limit(); is != was {
			out = append(out, fmt.Sprintf("quotas[%d].%s", i, is))
		}
	}
	return out
}

// index matches the indices of a field path, for matching LiveFields.
var index = regexp.MustCompile(`\[\d+\]`)

// isLive reports whether the field at path may change live.
func isLive(path string) bool {
	return slices.Contains(LiveFields, index.ReplaceAllString(path, "[*]"))
}

// walk appends to out the path of every field that differs between a and
// b, values of one type, except the live ones. A list of another length,
// or a map with other keys, is one difference at its own path; an
// unexported field (a config's source text) is not compared.
func walk(a, b reflect.Value, path string, out *[]string) {
	if path != "" && isLive(path) {
		return
	}
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			switch {
			case name == "-":
				continue
			case opts == "inline":
				walk(a.Field(i), b.Field(i), path, out)
				continue
			case name == "":
				name = strings.ToLower(f.Name)
			}
			walk(a.Field(i), b.Field(i), join(path, name), out)
		}
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				*out = append(*out, path)
			}
			return
		}
		walk(a.Elem(), b.Elem(), path, out)
	case reflect.Slice:
		if a.Len() != b.Len() {
			*out = append(*out, path)
			return
		}
		for i := range a.Len() {
			walk(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		keys := func(m reflect.Value) []string {
			ks := make([]string, 0, m.Len())
			for _, k := range m.MapKeys() {
				ks = append(ks, k.String())
			}
			slices.Sort(ks)
			return ks
		}
		if a.Type().Key().Kind() != reflect.String || !slices.Equal(keys(a), keys(b)) {
			if !reflect.DeepEqual(a.Interface(), b.Interface()) {
				*out = append(*out, path)
			}
			return
		}
		for _, k := range keys(a) {
			kv := reflect.ValueOf(k).Convert(a.Type().Key())
			walk(a.MapIndex(kv), b.MapIndex(kv), mapKey(path, k), out)
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, path)
		}
	}
}

// join extends a field path by a struct field's key.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// plainKey is a map key a field path writes after a dot; config.ErrorAt
// reads any other quoted in brackets.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// mapKey extends a field path by a map key.
func mapKey(path, k string) string {
	if !plainKey.MatchString(k) {
		return path + "[" + strconv.Quote(k) + "]"
	}
	return join(path, k)
}
