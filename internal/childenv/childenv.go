// Package childenv builds the environment of a program the gateway starts
// (an MCP stdio server, an exec extension): a short allow-list inherited
// from the gateway plus the variables its config sets, never the
// gateway's whole environment, which holds upstream API keys, the database
// DSN and extension secrets.
package childenv

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
)

// Inherited are the only variables a child inherits from the gateway (the
// MCP TypeScript SDK's default set, plus TMPDIR and LANG).
var Inherited = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG"}

// Env returns a child's environment: the Inherited variables the gateway
// has, then extra in name order (a name of both takes extra's value, the
// last one, as os/exec does). It is never nil, even when the gateway has
// none of them and extra is empty: an exec.Cmd whose Env is nil inherits
// the gateway's whole environment.
func Env(extra map[string]string) []string {
	env := []string{}
	for _, k := range Inherited {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// portableName is a POSIX portable environment variable name.
var portableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckName reports a variable name a config may not set: one that is
// not letters, digits and '_' (not starting with a digit).
func CheckName(name string) error {
	if !portableName.MatchString(name) {
		return fmt.Errorf("%q is not a variable name (letters, digits and '_', not starting with a digit)", name)
	}
	return nil
}
