package gateway

import (
	"fmt"
	"os"
	"strings"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/provider/openai"
	"github.com/turngate/turngate/engine/provider/scripted"
	"github.com/turngate/turngate/gateway/config"
)

// resolver maps model aliases (and "provider/model" names) to providers.
type resolver struct {
	providers map[string]engine.Provider
	aliases   map[string]config.Model
}

// NewResolver builds the configured providers and returns the resolver of
// cfg's model aliases. A model name that is not an alias may name a
// provider and an upstream model as "provider/model".
func NewResolver(cfg *config.Config) (engine.ModelResolver, error) {
	r := &resolver{providers: map[string]engine.Provider{}, aliases: cfg.Models}
	for _, p := range cfg.Providers {
		prov, err := newProvider(p)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		r.providers[p.Name] = prov
	}
	return r, nil
}

func newProvider(p config.Provider) (engine.Provider, error) {
	switch p.Type {
	case config.ProviderScripted:
		opts := []scripted.Option{scripted.WithChunkDelay(p.ChunkDelay)}
		if p.Script == "" {
			return scripted.Default(opts...), nil
		}
		data, err := os.ReadFile(p.Script)
		if err != nil {
			return nil, fmt.Errorf("reading script: %w", err)
		}
		script, err := scripted.Parse(p.Script, data)
		if err != nil {
			return nil, err
		}
		return scripted.New(script, opts...), nil
	case config.ProviderOpenAI:
		return openai.New(openai.Config{Name: p.Name, BaseURL: p.BaseURL, APIKey: p.APIKey, Headers: p.Headers}), nil
	}
	return nil, fmt.Errorf("provider type %q is not available in this build", p.Type)
}

// Resolve implements engine.ModelResolver.
func (r *resolver) Resolve(model string) (engine.Provider, string, error) {
	if m, ok := r.aliases[model]; ok {
		return r.providers[m.Provider], m.Model, nil
	}
	if name, id, ok := strings.Cut(model, "/"); ok {
		if p, ok := r.providers[name]; ok && id != "" {
			return p, id, nil
		}
	}
	return nil, "", fmt.Errorf("unknown model %q", model)
}
