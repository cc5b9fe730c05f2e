// Package registry resolves model names to providers: the
// engine.ModelResolver the wiring in cmd/ builds from configuration.
package registry

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/turngate/turngate/engine"
)

// Alias is what a configured model name stands for.
type Alias struct {
	// Provider names a registered provider.
	Provider string
	// Model is the upstream model id sent to the provider.
	Model string
}

// Registry is an immutable engine.ModelResolver, safe for concurrent use.
// A name resolves as an alias first, then as "provider/model" (the model
// id may itself contain slashes: "vllm/meta-llama/Llama-3.1-8B").
type Registry struct {
	providers map[string]engine.Provider
	aliases   map[string]Alias
}

// New validates and returns a Registry: every alias must name a registered
// provider and a model id, and no alias may shadow a "provider/…" name.
// All problems are reported together.
func New(providers map[string]engine.Provider, aliases map[string]Alias) (*Registry, error) {
	var errs []error
	r := &Registry{providers: map[string]engine.Provider{}, aliases: map[string]Alias{}}
	for name, p := range providers {
		switch {
		case name == "" || strings.Contains(name, "/"):
			errs = append(errs, fmt.Errorf("provider name %q: must be non-empty and contain no slash", name))
		case p == nil:
			errs = append(errs, fmt.Errorf("provider %q: nil provider", name))
		default:
			r.providers[name] = p
		}
	}
	for name, a := range aliases {
		switch {
		case name == "":
			errs = append(errs, errors.New("alias with an empty name"))
		case providers[a.Provider] == nil:
			errs = append(errs, fmt.Errorf("alias %q: unknown provider %q", name, a.Provider))
		case a.Model == "":
			errs = append(errs, fmt.Errorf("alias %q: no model id", name))
		case providers[strings.SplitN(name, "/", 2)[0]] != nil && strings.Contains(name, "/"):
			errs = append(errs, fmt.Errorf("alias %q: shadows a provider/model name", name))
		default:
			r.aliases[name] = a
		}
	}
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, fmt.Errorf("building model registry: %w", errors.Join(errs...))
	}
	return r, nil
}

// Resolve returns the provider and upstream model id for model.
func (r *Registry) Resolve(model string) (engine.Provider, string, error) {
	if a, ok := r.aliases[model]; ok {
		return r.providers[a.Provider], a.Model, nil
	}
	if name, id, ok := strings.Cut(model, "/"); ok && id != "" {
		if p, ok := r.providers[name]; ok {
			return p, id, nil
		}
	}
	return nil, "", fmt.Errorf("resolving model %q: no alias or provider/model of that name (aliases: %s)", model, strings.Join(r.Aliases(), ", "))
}

// Aliases returns the alias names, sorted.
func (r *Registry) Aliases() []string {
	names := make([]string, 0, len(r.aliases))
	for n := range r.aliases {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Registry is the engine's model resolver.
var _ engine.ModelResolver = (*Registry)(nil)
