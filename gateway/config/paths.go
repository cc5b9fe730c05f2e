package config

import (
	"path/filepath"
	"strings"
)

// resolvePaths makes c's relative file paths (rules.dir, store.path,
// audit.path, providers' script, context block files) absolute against dir, the directory of the
// config file, as Prometheus and most config-driven servers do: a config
// means the same files whatever the working directory it is started from.
func (c *Config) resolvePaths(dir string) {
	resolve := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	resolve(&c.Rules.Dir)
	resolve(&c.Store.Path)
	resolve(&c.Audit.Path)
	for i := range c.Providers {
		resolve(&c.Providers[i].Script)
	}
	for i := range c.Extensions {
		// A bare program name is looked up in PATH, as a shell would.
		if cmd := c.Extensions[i].Command; len(cmd) > 0 && strings.ContainsRune(cmd[0], '/') {
			resolve(&cmd[0])
		}
	}
	for _, a := range c.Agents {
		if a.Session != nil {
			for j := range a.Session.Context {
				resolve(&a.Session.Context[j].File)
			}
		}
	}
}
